"""One router per resource; the app factory includes every module here that defines ``router``."""
