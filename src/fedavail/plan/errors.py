"""ConfigError, the error every config check raises (fedavail.plan.checks), and how an error message echoes a config
value: cut to a length a terminal can show."""

# Characters of a config value an error message echoes, and of a whole message (a value of a megabyte, or a long
# chain of values in a message built from a plan-layer error, would otherwise flood the terminal).
MAX_ECHO_LENGTH = 200
MAX_MESSAGE_LENGTH = 2000


def cut(text: str, limit: int) -> str:
    """`text`, cut after `limit` characters with a note of its full length."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def shorten(value, limit: int = MAX_ECHO_LENGTH) -> str:
    """repr(value) as an error message echoes it: cut after `limit` characters."""
    return cut(repr(value), limit)


class ConfigError(ValueError):
    """A config value that cannot run; the message names the key (and is cut after MAX_MESSAGE_LENGTH characters)."""

    def __init__(self, message: str):
        super().__init__(cut(message, MAX_MESSAGE_LENGTH))
