"""Chapter 01: the character tokenizer, BOS framing and the training windows."""

from __future__ import annotations

import string

import pytest

from hero_transformer.tokenizer import CharTokenizer, training_windows


@pytest.fixture
def tok():
    return CharTokenizer(["ana", "bob", "emma"])


def test_vocabulary_is_sorted_characters_plus_bos(tok):
    assert tok.chars == ["a", "b", "e", "m", "n", "o"]
    assert tok.bos_id == 6
    assert tok.vocab_size == 7
    assert [tok.stoi[c] for c in tok.chars] == list(range(6))


def test_ana_is_bos_a_n_a_bos(tok):
    ids = tok.encode_document("ana")
    a, n, bos = tok.stoi["a"], tok.stoi["n"], tok.bos_id
    assert ids == [bos, a, n, a, bos]
    assert len(ids) == 5


def test_ana_gives_four_scored_positions(tok):
    ids = tok.encode_document("ana")
    inputs, targets = training_windows(ids, block_size=16)
    assert len(inputs) == len(targets) == 4
    assert inputs == ids[:4]
    assert targets == ids[1:5]
    assert targets[-1] == tok.bos_id  # the last position predicts the closing BOS
    for p in range(4):
        assert targets[p] == ids[p + 1]


@pytest.mark.parametrize("length", [2, 3, 5, 9, 17])
@pytest.mark.parametrize("block_size", [1, 4, 8, 16])
def test_positions_is_min_of_block_size_and_len_minus_one(length, block_size):
    ids = list(range(length))
    inputs, targets = training_windows(ids, block_size)
    positions = min(block_size, length - 1)
    assert len(inputs) == len(targets) == positions
    assert inputs == ids[:positions]
    assert targets == ids[1 : positions + 1]


def test_windows_reject_documents_without_a_target_and_bad_block_size():
    with pytest.raises(ValueError):
        training_windows([3], block_size=4)
    with pytest.raises(ValueError):
        training_windows([], block_size=4)
    with pytest.raises(ValueError, match="block_size"):
        training_windows([1, 2, 3], block_size=0)


@pytest.mark.parametrize("text", ["", "a", "ana", "emmabob", "mamamoo"])
def test_encode_decode_round_trip(tok, text):
    ids = tok.encode(text)
    assert len(ids) == len(text)
    assert all(0 <= i < tok.bos_id for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode_document(text)) == text  # BOS is dropped on decode


def test_decode_accepts_tensor_like_ints(tok):
    torch = pytest.importorskip("torch")
    ids = torch.tensor(tok.encode_document("bob"))
    assert tok.decode(ids) == "bob"


def test_unknown_character_raises_value_error_naming_it(tok):
    with pytest.raises(ValueError, match="'z'"):
        tok.encode("anza")
    with pytest.raises(ValueError, match="'Q'"):
        tok.encode_document("Q")


def test_decode_rejects_out_of_vocabulary_ids(tok):
    with pytest.raises(ValueError, match="99"):
        tok.decode([0, 99])
    with pytest.raises(ValueError):
        tok.decode([-1])


def test_empty_corpus_is_rejected():
    with pytest.raises(ValueError, match="empty"):
        CharTokenizer([])
    with pytest.raises(ValueError):
        CharTokenizer(["", ""])


def test_names_corpus_has_27_symbol_vocabulary():
    data = pytest.importorskip("hero_transformer.data")
    names = data.load_names()
    assert len(names) > 1000
    assert all(n.isascii() and n.isalpha() and n == n.lower() for n in names)
    assert list(names) == sorted(set(names))
    tok = CharTokenizer(names)
    assert tok.chars == list(string.ascii_lowercase)
    assert tok.vocab_size == 27
    assert tok.bos_id == 26
    doc = tok.encode_document(names[0])
    assert doc[0] == doc[-1] == 26 and tok.decode(doc) == names[0]


def test_train_validation_split_is_seeded_and_disjoint():
    from hero_transformer.data import train_validation_split

    names = [f"n{i}" for i in range(100)]
    train, valid = train_validation_split(names, fraction=0.1, seed=7)
    assert (len(train), len(valid)) == (90, 10)
    assert sorted(train + valid) == sorted(names)
    assert train_validation_split(names, fraction=0.1, seed=7) == (train, valid)
    assert train_validation_split(names, fraction=0.1, seed=8) != (train, valid)
