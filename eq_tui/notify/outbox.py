"""The outbox: notifications survive an engine restart until their target has them.

`notify_outbox.jsonl` in the run dir, append-only, one record a line, each fsynced before
anything is sent:
    {"op": "note", "target": KEY, "note": {...}}       a note a target is owed
    {"op": "batch", "target": KEY, "id": ID, "notes": [note ids]}   a message formed
    {"op": "sent", "target": KEY, "id": ID}            the target took it
    {"op": "seen", "ids": [...]}                       notes made before (compacted)
A message formed but not confirmed is sent again, with the same id, after a restart
(at-least-once: a receiver drops repeats by id). On load the file is compacted to what is
still owed plus the ids already made.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eq_tui.notify.notes import Note

OUTBOX = "notify_outbox.jsonl"


@dataclass
class Batch:
    id: str
    notes: list[Note]


@dataclass
class TargetBox:
    pending: list[Note] = field(default_factory=list)  # owed, not yet in a message
    batch: Batch | None = None  # formed, not yet confirmed


class Outbox:
    def __init__(self, run_dir: Path, targets: list[str]) -> None:
        self.path = Path(run_dir) / OUTBOX
        self.boxes: dict[str, TargetBox] = {key: TargetBox() for key in targets}
        self.seen: set[str] = set()  # (target, note id) made once, ever
        self._load()

    def _load(self) -> None:
        notes: dict[tuple[str, str], Note] = {}
        batches: dict[tuple[str, str], list[str]] = {}
        for record in self._records():
            op, target = record.get("op"), str(record.get("target", ""))
            if op == "seen":
                self.seen.update(str(key) for key in record.get("ids") or [])
            elif op == "note":
                note = Note.from_json(record["note"])
                notes[(target, note.id)] = note
                self.seen.add(f"{target} {note.id}")
            elif op == "batch":
                batches[(target, str(record["id"]))] = [str(i) for i in record["notes"]]
            elif op == "sent":
                for note_id in batches.pop((target, str(record["id"])), []):
                    notes.pop((target, note_id), None)
        for (target, batch_id), ids in batches.items():
            box = self.boxes.get(target)
            owed = [notes.pop((target, i)) for i in ids if (target, i) in notes]
            if box is not None and owed:
                box.batch = Batch(batch_id, owed)
        for (target, _), note in notes.items():
            if target in self.boxes:
                self.boxes[target].pending.append(note)
        self._compact()

    def _records(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        records = []
        for line in text.splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a line cut off by a crash: the rest still counts
        return records

    def _compact(self) -> None:
        lines: list[dict[str, Any]] = [{"op": "seen", "ids": sorted(self.seen)}]
        for target, box in self.boxes.items():
            owed = (box.batch.notes if box.batch else []) + box.pending
            lines += [{"op": "note", "target": target, "note": n.to_json()} for n in owed]
            if box.batch:
                lines.append({"op": "batch", "target": target, "id": box.batch.id,
                              "notes": [n.id for n in box.batch.notes]})
        tmp = self.path.with_name(f".{OUTBOX}.tmp")
        with open(tmp, "w") as handle:
            handle.write("".join(json.dumps(line) + "\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def _append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    # ---- what the notifier does --------------------------------------------------------------

    def add(self, target: str, note: Note) -> bool:
        """Owe `note` to `target`, once ever; False when it was made before."""
        key = f"{target} {note.id}"
        if key in self.seen or target not in self.boxes:
            return False
        self.seen.add(key)
        self._append({"op": "note", "target": target, "note": note.to_json()})
        self.boxes[target].pending.append(note)
        return True

    def next_batch(self, target: str, new_id: str) -> Batch | None:
        """The message to send next: the unconfirmed one, else every note owed (recorded)."""
        box = self.boxes[target]
        if box.batch is None and box.pending:
            box.batch = Batch(new_id, box.pending)
            box.pending = []
            self._append({"op": "batch", "target": target, "id": new_id,
                          "notes": [n.id for n in box.batch.notes]})
        return box.batch

    def sent(self, target: str) -> None:
        box = self.boxes[target]
        if box.batch is not None:
            self._append({"op": "sent", "target": target, "id": box.batch.id})
            box.batch = None

    def owed(self, target: str) -> bool:
        box = self.boxes[target]
        return box.batch is not None or bool(box.pending)
