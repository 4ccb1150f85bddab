"""rollbench.core.walk.walk_tree: the one bounded walk behind the run-file listing, the dashboard's run signature and
a checkpoint's fingerprint. Every expected listing below is written out by hand from the tree each test builds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rollbench.core.contracts import ConfigError
from rollbench.core.walk import Bounds, TreeEntry, TreeTooLarge, walk_tree

ROOMY = Bounds(max_entries=1000, max_depth=10, on_excess="refuse")


def _tree(root: Path) -> Path:
    """root/{a/{b/{deep.txt}, x.bin}, a-c.txt, c/, z.txt}: 4 regular files, 3 directories, 7 entries."""
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    (root / "a" / "b" / "deep.txt").write_bytes(b"1234")
    (root / "a" / "x.bin").write_bytes(b"")
    (root / "a-c.txt").write_bytes(b"12")
    (root / "z.txt").write_bytes(b"123456789")
    return root


def _rels(entries: list[TreeEntry]) -> list[str]:
    return [e.rel for e in entries]


def test_every_regular_file_is_listed_in_path_order_with_its_lstat(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    listing = walk_tree(root, ROOMY)
    # path order compares components: "a/..." comes before "a-c.txt" although "/" sorts after "-" as a character
    assert _rels(listing.files) == ["a/b/deep.txt", "a/x.bin", "a-c.txt", "z.txt"]
    assert [e.size for e in listing.files] == [4, 0, 2, 9]
    st = os.lstat(root / "a" / "b" / "deep.txt")
    first = listing.files[0]
    assert (first.mtime_ns, first.inode, first.device, first.depth, first.name) == (
        st.st_mtime_ns,
        st.st_ino,
        st.st_dev,
        2,
        "deep.txt",
    )
    assert (listing.others, listing.unreadable, listing.truncated) == ([], [], None)


def test_links_are_listed_as_others_and_never_followed(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text("s")
    (outside / "sub" / "more.txt").write_text("m")
    (root / "to_dir").symlink_to(outside)
    (root / "a" / "to_file").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(tmp_path / "missing")
    listing = walk_tree(root, ROOMY)
    assert _rels(listing.files) == ["a/b/deep.txt", "a/x.bin", "a-c.txt", "z.txt"]
    assert [(e.rel, e.kind) for e in listing.others] == [
        ("a/to_file", "symbolic link"),
        ("dangling", "symbolic link"),
        ("to_dir", "symbolic link"),
    ]


def test_hard_links_are_listed_under_every_name(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    os.link(root / "z.txt", root / "a" / "z2.txt")
    listing = walk_tree(root, ROOMY)
    assert _rels(listing.files) == ["a/b/deep.txt", "a/x.bin", "a/z2.txt", "a-c.txt", "z.txt"]
    assert listing.files[2].inode == listing.files[4].inode


def test_a_fifo_is_listed_and_never_opened(tmp_path: Path) -> None:
    """Run in a child with a deadline: opening the FIFO for reading would block forever (no writer), so a
    regression fails the test by timeout instead of hanging the suite."""
    root = _tree(tmp_path / "t")
    os.mkfifo(root / "a" / "pipe")
    os.mkfifo(root / "pipe-root")
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from rollbench.core.walk import Bounds, walk_tree
        listing = walk_tree(Path({str(root)!r}), Bounds(1000, 10, "refuse"))
        print([e.rel for e in listing.files])
        print([(e.rel, e.kind) for e in listing.others])
        fifo_root = walk_tree(Path({str(root / "pipe-root")!r}), Bounds(1000, 10, "refuse"))
        print(fifo_root.files, fifo_root.unreadable)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['a/b/deep.txt', 'a/x.bin', 'a-c.txt', 'z.txt']",
        "[('a/pipe', 'FIFO'), ('pipe-root', 'FIFO')]",
        "[] ['']",
    ]


def test_too_many_entries_is_refused_naming_the_directory(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    # the root holds 4 entries (a, a-c.txt, c, z.txt); "a" holds 2 more: 6 fit, "a/b" (1 entry) is the 7th
    assert _rels(walk_tree(root, Bounds(7, 10, "refuse")).files) == ["a/b/deep.txt", "a/x.bin", "a-c.txt", "z.txt"]
    why = f"{root / 'a' / 'b'}: more than 6 directory entries under {root}; refused"
    with pytest.raises(TreeTooLarge, match=f"^{re.escape(why)}$"):
        walk_tree(root, Bounds(6, 10, "refuse"))
    assert issubclass(TreeTooLarge, ConfigError)  # a plain one-line error for the CLI (exit 2)


def test_too_many_entries_truncates_at_a_whole_directory_and_says_so(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    listing = walk_tree(root, Bounds(5, 10, "truncate"))
    # root: 4 entries (1 left); "a" holds 2: not read, so nothing under it and the walk stops
    assert _rels(listing.files) == ["a-c.txt", "z.txt"]
    assert _rels(listing.others) == ["a", "c"]
    assert listing.truncated == f"{root / 'a'}: more than 5 directory entries under {root}"


def test_too_deep_is_refused_or_truncated_by_the_callers_choice(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    why = f"{root / 'a' / 'b'}: more than 1 directory levels below {root}"
    with pytest.raises(TreeTooLarge, match=f"^{re.escape(why)}; refused$"):
        walk_tree(root, Bounds(1000, 1, "refuse"))
    listing = walk_tree(root, Bounds(1000, 1, "truncate"))
    assert _rels(listing.files) == ["a/x.bin", "a-c.txt", "z.txt"]
    assert _rels(listing.others) == ["a/b", "c"]  # a/b not entered; c still pending when the walk stopped
    assert listing.truncated == why
    assert _rels(walk_tree(root, Bounds(1000, 2, "refuse")).files) == ["a/b/deep.txt", "a/x.bin", "a-c.txt", "z.txt"]


def test_a_tree_deeper_than_the_interpreters_recursion_limit_is_walked(tmp_path: Path) -> None:
    d = tmp_path / "t"
    for _ in range(200):
        d = d / "d"
    d.mkdir(parents=True)
    (d / "bottom.txt").write_text("x")
    code = textwrap.dedent(  # a child whose Python stack is 100 frames deep: a recursive walk would fail there
        f"""
        import sys
        from pathlib import Path
        from rollbench.core.walk import Bounds, walk_tree
        sys.setrecursionlimit(100)
        print([e.rel for e in walk_tree(Path({str(tmp_path / "t")!r}), Bounds(10_000, 200, "refuse")).files])
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(["/".join(["d"] * 200 + ["bottom.txt"])])


def test_declined_directories_are_listed_not_entered(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    listing = walk_tree(root, Bounds(4, 10, "refuse"), descend=lambda e: e.name != "a")  # "a" unread: 4 entries
    assert _rels(listing.files) == ["a-c.txt", "z.txt"]
    assert _rels(listing.others) == ["a"]  # c is entered (empty), so it is not in others


def test_the_order_does_not_depend_on_creation_order(tmp_path: Path) -> None:
    names = ["b10", "a", "B", "b2", "a.x", "_"]
    for i, order in enumerate((names, list(reversed(names)))):
        root = tmp_path / str(i)
        root.mkdir()
        for n in order:
            (root / n).write_text(n)
        assert _rels(walk_tree(root, ROOMY).files) == ["B", "_", "a", "a.x", "b10", "b2"]  # code point order


def test_a_missing_root_is_empty_and_a_file_root_is_unreadable(tmp_path: Path) -> None:
    missing = walk_tree(tmp_path / "missing", ROOMY)
    (tmp_path / "f").write_text("x")
    a_file = walk_tree(tmp_path / "f", ROOMY)
    assert (missing.files, missing.others, missing.unreadable) == ([], [], [])
    assert (a_file.files, a_file.others, a_file.unreadable) == ([], [], [""])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory without permission")
def test_an_unreadable_directory_is_named_and_the_rest_listed(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    (root / "a" / "b").chmod(0)
    try:
        listing = walk_tree(root, ROOMY)
    finally:
        (root / "a" / "b").chmod(0o755)
    assert _rels(listing.files) == ["a/x.bin", "a-c.txt", "z.txt"]
    assert listing.unreadable == ["a/b"]


def test_the_run_file_listing_refuses_a_tree_deeper_than_its_bound_in_one_line(tmp_path: Path) -> None:
    from rollbench.record.safe_files import MAX_DEPTH, scan_run_files

    run = tmp_path / "run"
    (run / "data" / "chunk-000").mkdir(parents=True)
    (run / "data" / "chunk-000" / "file-000.parquet").write_bytes(b"p")
    deep = run / "notes"
    for _ in range(MAX_DEPTH + 1):
        deep = deep / "n"
    deep.mkdir(parents=True)
    # the writer's files are listed as before: the pattern never enters notes/
    assert scan_run_files(run, "data/chunk-*/file-*.parquet").files == [run / "data/chunk-000/file-000.parquet"]
    too_deep = run / "/".join(["notes"] + ["n"] * MAX_DEPTH)
    with pytest.raises(ConfigError, match=f"^{re.escape(f'{too_deep}: more than {MAX_DEPTH} directory levels')}"):
        scan_run_files(run, "**")


def test_a_checkpoint_fingerprint_refuses_or_truncates_past_its_bound(tmp_path: Path) -> None:
    from rollbench.checkpoints.discover import Checkpoint, fingerprint

    folder = tmp_path / "ckpt"
    (folder / "sub").mkdir(parents=True)
    for rel, data in (("config.json", b"{}"), ("model.safetensors", b"w" * 7), ("sub/z.bin", b"zz")):
        (folder / rel).write_bytes(data)
    mtimes = {rel: os.lstat(folder / rel).st_mtime_ns for rel in ("config.json", "model.safetensors", "sub/z.bin")}
    ckpt = Checkpoint(5000, "005000", folder)
    assert fingerprint(ckpt, 4, "refuse") == (
        ("config.json", 2, mtimes["config.json"]),
        ("model.safetensors", 7, mtimes["model.safetensors"]),
        ("sub/z.bin", 2, mtimes["sub/z.bin"]),
    )
    with pytest.raises(ConfigError, match=f"^step 5000: {re.escape(str(folder / 'sub'))}: more than 3 directory"):
        fingerprint(ckpt, 3, "refuse")
    assert fingerprint(ckpt, 3, "truncate") == (  # sub/ is not read; the same on every poll
        ("config.json", 2, mtimes["config.json"]),
        ("model.safetensors", 7, mtimes["model.safetensors"]),
    )


def test_a_run_signature_past_its_bound_is_the_same_truncated_one_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollbench.dashboard import catalog

    run = _tree(tmp_path / "run")
    (run / "run.live.json").write_text("{}")
    monkeypatch.setattr(catalog, "SIGNATURE_BOUNDS", Bounds(max_entries=5, max_depth=10, on_excess="truncate"))
    # the root's 5 entries fit (a, a-c.txt, c, run.live.json, z.txt); "a" (2 entries) does not, so nothing below it
    expected = tuple(
        (rel, os.lstat(run / rel).st_size, os.lstat(run / rel).st_mtime_ns, os.lstat(run / rel).st_ino)
        for rel in ("a-c.txt", "z.txt")
    )
    assert catalog.run_signature(run) == expected
    assert catalog.run_signature(run) == expected
