"""The transparency log's storage (SPEC §15.3), laid out so every read is O(log n) rows: the
sequencer stores the hash of every perfect subtree as it closes, so any root or proof is a fold of
a few dozen stored nodes, fetched in one query."""

from django.db import models


class QueuedEntry(models.Model):
    id = models.BigAutoField(primary_key=True)
    entry = models.TextField()  # JCS text: these bytes are the leaf's, exactly
    queued_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]


class Log(models.Model):
    """A log started after the database went back (SPEC §16.2); log 0 has no row. Its leaf i is
    `Leaf` `start + i`: leaf indices stay one sequence across logs."""

    number = models.PositiveIntegerField(primary_key=True)
    origin = models.CharField(max_length=255, unique=True)
    start = models.BigIntegerField(unique=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["number"]


class Leaf(models.Model):
    index = models.BigIntegerField(primary_key=True)
    leaf_hash = models.CharField(max_length=64, db_index=True)
    entry = models.TextField()
    # Read off the entry as it is integrated: one task's entries are an index lookup, not a scan.
    task_id = models.UUIDField(null=True, db_index=True)
    queued_at = models.DateTimeField()
    integrated_at = models.DateTimeField()

    class Meta:
        ordering = ["index"]


class Node(models.Model):
    """The hash of the perfect subtree over leaves [index·2^level, (index+1)·2^level) of `log`."""

    log = models.PositiveIntegerField(default=0)
    level = models.PositiveSmallIntegerField()
    index = models.BigIntegerField()
    hash = models.BinaryField(max_length=32)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["log", "level", "index"], name="node_once_per_log")
        ]


class Checkpoint(models.Model):
    """A signed note (C2SP tlog-checkpoint) naming a tree size and its root hash."""

    id = models.BigAutoField(primary_key=True)
    log = models.PositiveIntegerField(default=0)
    tree_size = models.BigIntegerField()
    root_hash = models.CharField(max_length=64)
    note = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-id"]
        get_latest_by = "id"
        # The earliest checkpoint holding an entry is found by walking tree sizes upward.
        indexes = [models.Index(fields=["log", "tree_size"], name="checkpoint_log_tree_size")]


class Cosignature(models.Model):
    """Kept so every checkpoint is served with all the cosignatures it got (SPEC §15.4)."""

    checkpoint = models.ForeignKey(
        Checkpoint, on_delete=models.CASCADE, related_name="cosignatures"
    )
    witness = models.CharField(max_length=500)  # the witness's verifier key, as configured
    signed_at = models.DateTimeField()  # the witness's own timestamp
    line = models.TextField()  # the note signature line, exactly as the witness sent it

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["checkpoint", "witness"], name="cosigned_once")
        ]
        # A witness's latest cosignature: the old size the sequencer sends it.
        indexes = [models.Index(fields=["witness", "checkpoint"], name="cosignature_by_witness")]


class WitnessedLog(models.Model):
    """The latest checkpoint Cairn as a witness cosigned of a log (SPEC §15.4), only ever
    advanced under its row lock."""

    origin = models.CharField(max_length=255, unique=True)
    tree_size = models.BigIntegerField()
    root_hash = models.BinaryField(max_length=32)
    updated_at = models.DateTimeField()


class CosignedCheckpoint(models.Model):
    """Every checkpoint cosigned, since a keyper's release is proven against any root it vouched
    for (SPEC §15.8); written in the transaction that advances `WitnessedLog`."""

    origin = models.CharField(max_length=255)
    tree_size = models.BigIntegerField()
    root_hash = models.BinaryField(max_length=32)
    # The checkpoint as submitted, with this witness's own cosignature line appended.
    note = models.TextField()
    cosigned_at = models.DateTimeField()

    class Meta:
        constraints = [
            # A witness never cosigns two roots of one size (§15.4); the same checkpoint cosigned
            # again keeps its first row. The index also finds a log's latest.
            models.UniqueConstraint(fields=["origin", "tree_size"], name="cosigned_size_once")
        ]


class KeyperRelease(models.Model):
    """A release kept as given, so every later ask gets the same bytes (§15.8). Keyed by the sealed
    share's digest too: anyone can seal bytes to a keyper with a real contribution's `info`, and a
    forged share asked first must never be repeated to the contributor, voiding its report."""

    origin = models.CharField(max_length=255)
    contribution_id = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()
    sealed_share_digest = models.CharField(max_length=64)  # hex SHA-256 of the sealed bytes
    body = models.TextField()  # the JSON answer, byte for byte
    released_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["origin", "contribution_id", "index", "sealed_share_digest"],
                name="released_once",
            )
        ]
