"""RFC 9162 hashing and proofs against the RFC 6962 reference vectors (transparency-dev/merkle's
testonly/constants.go and proof/verify_test.go), and the cost of a proof at a million entries."""

from __future__ import annotations

import pytest

from ledger.merkle import (
    EMPTY_ROOT,
    consistency_ranges,
    consistency_verify,
    inclusion_ranges,
    inclusion_verify,
    leaf_hash,
    nodes_for,
    parents_closed_by,
    range_hash,
)
from tests.ledger.conftest import load_verifier

verifier = load_verifier()

LEAF_INPUTS = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]
NODE_HASHES = [
    [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
        "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
    ],
    [
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    ],
    [
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    ["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
]
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
# (leaf index, tree size, audit path); the reference numbers leaves from 1.
INCLUSION_PROOFS = [
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
CONSISTENCY_PROOFS = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (
        6,
        7,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
]


def reference_nodes() -> dict[tuple[int, int], bytes]:
    """The stored nodes after appending the reference leaves one by one, as the sequencer does."""
    nodes: dict[tuple[int, int], bytes] = {}
    for index, data in enumerate(LEAF_INPUTS):
        for key, value in parents_closed_by(index, leaf_hash(bytes.fromhex(data)), nodes):
            nodes[key] = value
    return nodes


def test_appending_stores_exactly_the_reference_node_hashes():
    stored = {key: value.hex() for key, value in reference_nodes().items()}
    expected = {
        (level, index): value
        for level, row in enumerate(NODE_HASHES)
        for index, value in enumerate(row)
    }
    assert stored == expected


@pytest.mark.parametrize("size", range(len(ROOTS)))
def test_the_root_of_every_size_is_the_reference_root(size):
    assert range_hash(0, size, reference_nodes()).hex() == ROOTS[size]
    assert EMPTY_ROOT.hex() == ROOTS[0]


@pytest.mark.parametrize("index, size, path", INCLUSION_PROOFS)
def test_inclusion_proofs_are_the_reference_audit_paths(index, size, path):
    nodes = reference_nodes()
    proof = [range_hash(start, end, nodes).hex() for start, end in inclusion_ranges(index, size)]
    assert proof == path


@pytest.mark.parametrize("first, second, path", CONSISTENCY_PROOFS)
def test_consistency_proofs_are_the_reference_proofs(first, second, path):
    nodes = reference_nodes()
    proof = [range_hash(s, e, nodes).hex() for s, e in consistency_ranges(first, second)]
    assert proof == path


def test_a_proof_at_a_million_entries_needs_a_few_dozen_stored_nodes():
    """Storage scales: every proof is a fold of O(log n) stored nodes, read in one query."""
    size = 1_000_000
    widest = max(
        len(nodes_for(inclusion_ranges(index, size)))
        for index in (0, 1, 524_287, 524_288, 999_998, 999_999)
    )
    widest_consistency = max(
        len(nodes_for(consistency_ranges(first, size)))
        for first in (1, 3, 524_288, 700_001, 999_999)
    )
    assert widest <= 2 * 20 and widest_consistency <= 2 * 20


@pytest.mark.parametrize("index, size, path", INCLUSION_PROOFS)
def test_the_verifier_accepts_the_reference_audit_paths_and_refuses_a_changed_one(
    index, size, path
):
    leaf = leaf_hash(bytes.fromhex(LEAF_INPUTS[index]))
    hashes = [bytes.fromhex(h) for h in path]
    root = bytes.fromhex(ROOTS[size])
    assert verifier.inclusion_verify(index, size, leaf, hashes, root)
    if hashes:
        changed = [hashes[0][::-1], *hashes[1:]]
        assert not verifier.inclusion_verify(index, size, leaf, changed, root)


@pytest.mark.parametrize("first, second, path", CONSISTENCY_PROOFS)
def test_the_verifier_accepts_the_reference_consistency_proofs_and_refuses_another_root(
    first, second, path
):
    hashes = [bytes.fromhex(h) for h in path]
    old, new = bytes.fromhex(ROOTS[first]), bytes.fromhex(ROOTS[second])
    verifier.check_consistency(first, second, old, new, hashes)
    with pytest.raises(verifier.Failed):
        verifier.check_consistency(first, second, old[::-1], new, hashes)


@pytest.mark.parametrize("first, second, path", CONSISTENCY_PROOFS)
def test_the_witness_accepts_the_reference_consistency_proofs_and_nothing_changed(
    first, second, path
):
    hashes = [bytes.fromhex(h) for h in path]
    old, new = bytes.fromhex(ROOTS[first]), bytes.fromhex(ROOTS[second])
    assert consistency_verify(first, second, old, new, hashes)
    assert not consistency_verify(first, second, old[::-1], new, hashes)
    assert not consistency_verify(first, second, old, new[::-1], hashes)
    assert not consistency_verify(first, second, old, new, [*hashes, new])
    for at in range(len(hashes)):
        assert not consistency_verify(first, second, old, new, hashes[:at] + hashes[at + 1 :])
        changed = [*hashes[:at], hashes[at][::-1], *hashes[at + 1 :]]
        assert not consistency_verify(first, second, old, new, changed)


def _tree(size: int) -> dict[tuple[int, int], bytes]:
    nodes: dict[tuple[int, int], bytes] = {}
    for index in range(size):
        for key, value in parents_closed_by(index, leaf_hash(index.to_bytes(4, "big")), nodes):
            nodes[key] = value
    return nodes


def test_every_proof_the_log_makes_up_to_40_leaves_verifies_and_only_for_its_own_sizes():
    nodes = _tree(40)
    for second in range(41):
        new = range_hash(0, second, nodes)
        for first in range(second + 1):
            old = range_hash(0, first, nodes)
            proof = [range_hash(s, e, nodes) for s, e in consistency_ranges(first, second)]
            assert consistency_verify(first, second, old, new, proof), (first, second)
            if 0 < first < second:
                assert not consistency_verify(first + 1, second, old, new, proof)
                assert not consistency_verify(first, second, old, new[::-1], proof)
                assert not consistency_verify(first, second, old[::-1], new, proof)
                assert not consistency_verify(second, first, new, old, proof)
    assert consistency_verify(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert not consistency_verify(0, 3, EMPTY_ROOT, range_hash(0, 3, nodes), [EMPTY_ROOT])
    assert not consistency_verify(5, 5, range_hash(0, 5, nodes), range_hash(0, 4, nodes), [])


@pytest.mark.parametrize("index, size, path", INCLUSION_PROOFS)
def test_the_keyper_accepts_the_reference_audit_paths_and_nothing_changed(index, size, path):
    leaf = leaf_hash(bytes.fromhex(LEAF_INPUTS[index]))
    hashes = [bytes.fromhex(h) for h in path]
    root = bytes.fromhex(ROOTS[size])
    assert inclusion_verify(index, size, leaf, hashes, root)
    assert not inclusion_verify(index, size, leaf[::-1], hashes, root)
    assert not inclusion_verify(index, size, leaf, hashes, root[::-1])
    assert not inclusion_verify(index, size, leaf, [*hashes, root], root)
    for at in range(len(hashes)):
        assert not inclusion_verify(index, size, leaf, hashes[:at] + hashes[at + 1 :], root)
        changed = [*hashes[:at], hashes[at][::-1], *hashes[at + 1 :]]
        assert not inclusion_verify(index, size, leaf, changed, root)


def test_every_audit_path_up_to_40_leaves_verifies_and_only_for_its_own_index():
    nodes = _tree(40)
    for size in range(1, 41):
        root = range_hash(0, size, nodes)
        for index in range(size):
            leaf = nodes[(0, index)]
            proof = [range_hash(s, e, nodes) for s, e in inclusion_ranges(index, size)]
            assert inclusion_verify(index, size, leaf, proof, root), (index, size)
            assert not inclusion_verify(index + 1, size, leaf, proof, root)
            if index:
                assert not inclusion_verify(index - 1, size, leaf, proof, root)
    assert not inclusion_verify(0, 0, EMPTY_ROOT, [], EMPTY_ROOT)
