import re

import numpy as np
import pytest
import torch

from fedavail.data import shakespeare as shk
from fedavail.data.prepared import text_windows

from data_fixtures import COMPLETE_WORKS, LONG_SPEECH, PLAY_TEXT


def leaf_txt_to_data(lines, seq_length):
    """LEAF's txt_to_data, written plainly: each line padded with seq_length spaces, one sample per character."""
    xs, ys = [], []
    for line in lines:
        padded = " " * seq_length + re.sub(r"   *", " ", line) + "\n"
        for i in range(len(padded) - seq_length):
            xs.append(padded[i:i + seq_length])
            ys.append(padded[i + seq_length])
    return xs, ys


def test_vocabulary_is_leafs_80_characters_plus_unknown():
    assert len(shk.ALL_LETTERS) == 80 and len(set(shk.ALL_LETTERS)) == 80
    assert shk.VOCAB == shk.ALL_LETTERS + shk.UNKNOWN_CHAR and shk.UNKNOWN_ID == 80
    ids = shk.encode("Ab\n{é")
    assert ids.dtype == np.int64
    assert ids.tolist() == [shk.ALL_LETTERS.index("A"), shk.ALL_LETTERS.index("b"), 0, 80, 80]
    assert shk.decode(shk.encode("Hello, world!\n")) == "Hello, world!\n"


def test_windows_and_next_character_targets_match_leaf():
    lines = ["To be,  or not", "Ay", "x" * 100]
    stream, positions = shk.role_stream(lines, seq_length=80)
    x = text_windows(torch.from_numpy(stream), torch.from_numpy(positions - 80), 80).numpy()
    y = stream[positions]
    xs, ys = leaf_txt_to_data(lines, 80)
    assert x.shape == (len(ys), 80) and y.shape == (len(ys),)
    assert [shk.decode(row) for row in x] == xs
    assert shk.decode(y) == "".join(ys)
    assert shk.decode(x[0]) == " " * 80 and shk.decode(y[:3]) == "To "
    assert shk.decode(x[len("To be, or not") + 1]) == " " * 80  # a new line starts from a blank window


def test_parse_play_reads_speakers_speech_and_skips_directions():
    title, roles = shk.parse_play(PLAY_TEXT)
    assert title == "THE TRAGEDY OF TESTING"
    prefix = "THE_TRAGEDY_OF_TESTING_"
    assert set(roles) == {prefix + r for r in ("ALP", "BET", "FIRST_GHOST", "MAR__AND_BER")}
    assert roles[prefix + "ALP"] == ["To test, or not to test:", "that is   the question.",
                                     "Whether 'tis nobler in the mind", "to suffer.", "The slings and arrows."]
    assert roles[prefix + "BET"] == ["Test."]


@pytest.mark.parametrize("line,name", [
    ("Hor.", "HOR"), ("KING. ", "KING"), ("THESEUS", "THESEUS"), ("1 Clown.", "1 CLOWN"), ("MRS. PAGE.", "MRS. PAGE"),
    ("Oph. [Sings.]", "OPH"), ("Antipholus of Syracuse.", "ANTIPHOLUS OF SYRACUSE"), ("Good night.", None),
    ("Come hither, sir.", None), ("ACT I.", None), ("Scene II. A room.", None), ("   SONG.", None),
])
def test_speaker_lines(line, name):
    assert shk.speaker_name(line) == name


def test_parse_complete_works_follows_leaf():
    roles = shk.parse_complete_works(COMPLETE_WORKS)
    assert set(roles) == {"THE_TRAGEDY_OF_TESTING_ALPHA", "THE_TRAGEDY_OF_TESTING_BETA",
                          "THE_COMEDY_OF_ERRORS_DUKE", "THE_COMEDY_OF_ERRORS_AEGEON"}  # no sonnets, no poem
    alpha = roles["THE_TRAGEDY_OF_TESTING_ALPHA"]
    # "Alpha." and "ALPHA." are one role; continuation lines belong to the last speaker.
    assert alpha[:2] == ["To test, or not to test: that is the question.", "Whether 'tis nobler in the mind to suffer"]
    assert alpha[3:-1] == LONG_SPEECH and alpha[-1] == "And by a test to say we end the heart-ache."
    assert roles["THE_COMEDY_OF_ERRORS_AEGEON"] == ["Proceed, Solinus, to procure my fall,",
                                                    "And by the doom of death end woes and all."]
    assert roles["THE_COMEDY_OF_ERRORS_DUKE"][:3] == ["Proceed, Solinus.", "Merchant of Syracuse, plead no more.",
                                                       "I am not partial."]


def test_split_keeps_leafs_gap_between_train_and_test():
    assert shk.split_point(1000, 0.8, 80) == (800, 879)
    assert shk.split_point(2, 0.8, 80) == (1, 80)
    roles = {"big": ["a" * 333, "b" * 332, "c" * 332], "small": ["b" * 99, "c", "d"], "few_lines": ["e" * 999, "f"]}
    data = shk.build_text_dataset("t", roles, {"min_samples": 1}, {})
    assert data["group_names"] == ["big"]  # "small" has no test sample after the gap, "few_lines" only 2 lines
    assert len(data["train_y"]) == 800 and len(data["test_y"]) == 1000 - 879
    assert (data["train_groups"] == 0).all() and (data["test_groups"] == 0).all()
    stream, positions = shk.role_stream(roles["big"])
    assert torch.equal(data["text"], torch.from_numpy(stream))
    assert torch.equal(data["test_x"], torch.from_numpy(positions[879:] - 80))
    assert shk.decode(data["test_y"][-2:]) == "c\n"


def test_selection_cut_off_and_largest_clients():
    roles = {f"r{i}": ["z" * (100 * i)] * 3 for i in range(1, 8)}  # 3 lines of 100*i characters
    assert shk.select_roles(roles, min_samples=64) == [f"r{i}" for i in range(2, 8)]  # r1: no test after the gap
    assert shk.select_roles(roles, min_samples=1500) == ["r5", "r6", "r7"]
    assert shk.select_roles(roles, num_clients=2) == ["r6", "r7"]
    with pytest.raises(ValueError, match="num_clients=9 but only 6 roles"):
        shk.select_roles(roles, num_clients=9)
    data = shk.build_text_dataset("t", roles, {"num_clients": 2}, {"source": "test"})
    assert data["group_names"] == ["r6", "r7"] and data["meta"]["num_clients"] == 2
    assert data["train_groups"].unique().tolist() == [0, 1] and data["meta"]["source"] == "test"
