"""The local (`method: session`) Spark and its confs."""
