"""Shakespeare next-character data built the LEAF way.

Clients are (play, speaking role) pairs. Each speech line of a role is left-padded with SEQ_LENGTH spaces and every
character of the line (its closing newline included) becomes one sample: x = the SEQ_LENGTH characters before it,
y = the character. Windows therefore never span two lines, exactly as LEAF's `txt_to_data`.

Which roles become clients (`select_roles`, LEAF's filters in LEAF's order):
  1. roles with at most 2 speech lines are dropped (LEAF needs one line for train and one for test);
  2. roles with fewer than `min_samples` samples are dropped (LEAF's -k; default MIN_SAMPLES = 64, the value of LEAF's
     documented `keep_64` files);
  3. each role is split by position: the first int(train_fraction * n) samples train, the samples from
     num_train + SEQ_LENGTH - 1 on test (LEAF's gap, so no test window overlaps a train target); roles left without a
     test sample are dropped, which in practice removes roles shorter than ~5 * SEQ_LENGTH characters;
  4. with `num_clients` set, the `num_clients` roles with the most samples are kept (ties by client id). FAST uses 139.
     LEAF instead samples users at random until a data fraction is reached; keeping the largest roles is deterministic
     and keeps the clients that carry most of the text."""

import re
from itertools import groupby

import numpy as np

from fedavail.data.prepared import text_dataset

# LEAF's 80-character alphabet (models/shakespeare/language_utils.py); any other character maps to UNKNOWN_CHAR.
ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
UNKNOWN_CHAR = "\ufffd"
VOCAB = ALL_LETTERS + UNKNOWN_CHAR
UNKNOWN_ID = len(ALL_LETTERS)
SPACE_ID = ALL_LETTERS.index(" ")

SEQ_LENGTH = 80
MIN_SAMPLES = 64
TRAIN_FRACTION = 0.8
MIN_LINES = 3

# The non-dramatic works have no speaking roles; they are recognised by a word of their title.
POEM_TITLE_WORDS = ("SONNETS", "COMPLAINT", "PILGRIM", "PHOENIX", "LUCRECE", "VENUS")

_ASCII_TO_ID = np.full(128, UNKNOWN_ID, dtype=np.int64)
_ASCII_TO_ID[[ord(c) for c in ALL_LETTERS]] = np.arange(len(ALL_LETTERS))


def is_poem(title: str) -> bool:
    return any(word in title.upper() for word in POEM_TITLE_WORDS)


def client_id(play: str, role: str) -> str:
    """LEAF's user name: play and role joined, every run of non-word characters replaced by '_'."""
    return re.sub(r"\W+", "_", f"{play}_{role}".replace(" ", "_"))


def normalize_line(text: str) -> str:
    # LEAF collapses runs of two or more spaces (indentation, alignment) into one before windowing.
    return re.sub(r"  +", " ", text)


# (speaker line, continuation line) of the complete works; the Comedy of Errors is not indented in that file.
_LEAF_LINES = re.compile(r"^  ([a-zA-Z][a-zA-Z ]*)\. (.*)"), re.compile(r"^    (.*)")
_COE_LINES = re.compile(r"^([a-zA-Z][a-zA-Z ]*)\. (.*)"), re.compile(r"^(.*)")


def parse_complete_works(text: str) -> dict[str, list[str]]:
    """{client id: speech lines} from the 1994 Gutenberg complete works LEAF downloads ("  NAME. speech" on a line
    indented by two spaces, continuation lines by four, plays introduced by "by William Shakespeare"), following LEAF's
    preprocess_shakespeare.py. LEAF skips the sonnets by starting at the second work and stops at a fixed line number
    of its copy of the file; here every non-dramatic work is skipped by its title instead, and works with at most one
    role are dropped as LEAF drops its "degenerate plays"."""
    lines = text.splitlines()
    plays: list[tuple[str, dict[str, list[str]]]] = []
    roles: dict[str, list[str]] | None = None
    current, comedy_of_errors = None, False
    for i, line in enumerate(lines):
        if "by William Shakespeare" in line:
            title = next((lines[j].strip() for j in range(i - 2, max(i - 8, -1), -1) if lines[j].strip()), None)
            if title is None:
                raise ValueError(f"line {i + 1}: no play title within 7 lines above 'by William Shakespeare'")
            roles, current = ({} if not is_poem(title) else None), None
            comedy_of_errors = title == "THE COMEDY OF ERRORS"
            speaker, continuation = _COE_LINES if comedy_of_errors else _LEAF_LINES
            if roles is not None:
                plays.append((title, roles))
        elif roles is not None and (match := speaker.match(line)):
            # Names appear in several casings (SIR TOBY, Sir Toby): LEAF upper-cases them.
            current = match.group(1).upper()
            if comedy_of_errors and current.startswith("ACT "):
                current = None
            else:
                roles.setdefault(current, []).append(match.group(2))
        elif current is not None and (match := continuation.match(line)):
            if comedy_of_errors and match.group(1).startswith("<"):
                current = None  # the file's copyright notices interrupt that play
            else:
                roles[current].append(match.group(1))
    return {client_id(title, name): speech for title, play_roles in plays if len(play_roles) > 1
            for name, speech in play_roles.items()}


# The play body starts at the first act or scene heading (the "SCENE: Verona" setting line counts); before it, the
# list of persons would otherwise read as speakers.
_HEADING = re.compile(r"^\s*(ACT|Act|SCENE|Scene)\b")
_SPEAKER_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.' &\-]*")
_NAME_JOINERS = {"and", "of", "the", "&", "de", "la", "le"}
_MAX_SPEAKER_WORDS = 5


def speaker_name(line: str) -> str | None:
    """The role a speaker line introduces ("Hor.", "KING. ", "1 Clown.", "Oph. [Sings.]"), upper-cased, or None."""
    head = re.split(r"[\[{]", line, maxsplit=1)[0].rstrip()  # a stage direction may follow the name
    words = head.split()
    if (len(head) > 40 or not _SPEAKER_TEXT.fullmatch(head) or not (head.endswith(".") or head.isupper())
            or len(words) > _MAX_SPEAKER_WORDS or _HEADING.match(head)):
        return None
    # Speech that happens to end in a period ("Good night.") has lower-case words; names do not.
    is_name = all(w[0].isupper() or w[0].isdigit() or w in _NAME_JOINERS for w in words)
    return head.rstrip(".").upper() if is_name else None


def parse_play(text: str) -> tuple[str, dict[str, list[str]]]:
    """(title, {client id: speech lines}) of one play of the `shakespeare` package: the speaker's name or abbreviation
    alone on a line, the speech on the following lines, blank-line separated. Poems yield no roles."""
    lines = text.splitlines()
    title = next((line.strip() for line in lines if line.strip()), "")
    start = next((i for i, line in enumerate(lines) if _HEADING.match(line)), None)
    if not title or is_poem(title) or start is None:
        return title, {}
    roles: dict[str, list[str]] = {}
    current = None
    blocks = groupby(lines[start:], key=lambda line: bool(line.strip()))
    for block in (list(block) for nonblank, block in blocks if nonblank):
        if _HEADING.match(block[0]):
            current = None
            continue
        name = speaker_name(block[0]) if len(block) > 1 else None
        if name is not None:
            current, block = name, block[1:]
            roles.setdefault(current, [])
        if current is None:
            continue
        in_direction = False
        for line in block:
            stripped = line.strip()
            # Whole-line stage directions ("[Exit.]", possibly over several lines) are not speech.
            if stripped.startswith("[") or in_direction:
                in_direction = "]" not in stripped
                continue
            roles[current].append(stripped)
    return title, {client_id(title, name): speech for name, speech in roles.items() if speech}


def encode(text: str) -> np.ndarray:
    """int64 ids of the characters of `text` in VOCAB; characters outside ALL_LETTERS get UNKNOWN_ID."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    return np.where(codes < 128, _ASCII_TO_ID[np.minimum(codes, 127)], UNKNOWN_ID)


def decode(ids) -> str:
    return "".join(VOCAB[int(i)] for i in ids)


def role_stream(lines: list[str], seq_length: int = SEQ_LENGTH) -> tuple[np.ndarray, np.ndarray]:
    """One role's token stream (uint8) and the position of every target in it: the lines are laid out as [pad, line 0,
    pad, line 1, ...] with seq_length spaces of padding, and every character of each line is a target whose input window
    is the seq_length tokens before it: window j is stream[positions[j] - seq_length : positions[j]], target j is
    stream[positions[j]]."""
    texts = [normalize_line(line) + "\n" for line in lines]
    ids = encode("".join(texts))
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    # Target j sits after j characters and one padding per line so far (its own line's included).
    positions = np.arange(int(lengths.sum())) + seq_length * np.repeat(np.arange(1, len(texts) + 1), lengths)
    stream = np.full(int(lengths.sum()) + seq_length * len(texts), SPACE_ID, dtype=np.uint8)
    stream[positions] = ids
    return stream, positions


def split_point(n: int, train_fraction: float, seq_length: int) -> tuple[int, int]:
    """(number of train samples, first test index) of a role with n samples, LEAF's split by position."""
    num_train = 1 if n == 2 else max(1, int(train_fraction * n))
    return num_train, num_train + seq_length - 1


def select_roles(roles: dict[str, list[str]], min_samples: int = MIN_SAMPLES, num_clients: int | None = None,
                 train_fraction: float = TRAIN_FRACTION, seq_length: int = SEQ_LENGTH) -> list[str]:
    """Client ids kept by LEAF's filters and the `num_clients` cut (module docstring), sorted by id."""
    sizes = {}
    for cid, lines in roles.items():
        n = sum(len(normalize_line(line)) + 1 for line in lines)  # one sample per character and closing newline
        if len(lines) >= MIN_LINES and n >= min_samples and split_point(n, train_fraction, seq_length)[1] < n:
            sizes[cid] = n  # split_point leaves at least one train sample: the test split is what may be empty
    if num_clients is not None:
        if num_clients > len(sizes):
            raise ValueError(f"num_clients={num_clients} but only {len(sizes)} roles have at least {min_samples} "
                             f"samples and a non-empty test split; lower num_clients or min_samples")
        sizes = dict(sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:num_clients])
    return sorted(sizes)


def build_text_dataset(name: str, roles: dict[str, list[str]], options: dict, meta: dict) -> dict:
    """The prepared dict of next-character samples for the selected roles. options: seq_length (80), min_samples
    (64), num_clients (None: every role passing the filters), train_fraction (0.8)."""
    seq_length = int(options.get("seq_length", SEQ_LENGTH))
    min_samples = int(options.get("min_samples", MIN_SAMPLES))
    num_clients = None if options.get("num_clients") is None else int(options["num_clients"])
    train_fraction = float(options.get("train_fraction", TRAIN_FRACTION))
    kept = select_roles(roles, min_samples, num_clients, train_fraction, seq_length)
    if not kept:
        raise ValueError(f"{name}: no role has {MIN_LINES}+ speech lines, at least {min_samples} samples and a "
                         f"non-empty test split")
    # Windows overlap almost entirely: store every role's stream once and each sample as its window's start.
    parts = {key: [] for key in ("train_x", "train_y", "test_x", "test_y", "train_groups", "test_groups")}
    streams, offset = [], 0
    for group, cid in enumerate(kept):
        stream, positions = role_stream(roles[cid], seq_length)
        num_train, test_start = split_point(len(positions), train_fraction, seq_length)
        for split, rows in (("train", slice(0, num_train)), ("test", slice(test_start, None))):
            parts[f"{split}_x"].append(offset + positions[rows] - seq_length)
            parts[f"{split}_y"].append(stream[positions[rows]].astype(np.int64))
            parts[f"{split}_groups"].append(np.full(len(positions[rows]), group, dtype=np.int64))
        streams.append(stream)
        offset += len(stream)
    meta = {**meta, "seq_length": seq_length, "min_samples": min_samples, "num_clients": len(kept),
            "train_fraction": train_fraction, "roles_parsed": len(roles),
            "client_selection": "largest roles by sample count" if num_clients is not None else "all"}
    return text_dataset(name, VOCAB, seq_length, parts, np.concatenate(streams), kept, meta)
