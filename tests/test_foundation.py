"""The shared foundation: errors, work directory, sharded matrix, light import."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from clusterclip import ClusterClipError
from clusterclip import io as workdir
from clusterclip.errors import MissingDependencyError, invalid, require_extra
from clusterclip.io.shards import ShardedMatrix


def test_invalid_message_names_parameter_rule_value_and_fix():
    error = invalid("max_repeats", "an int in [1, inf)", 0, "Pass 1 or more.")
    assert isinstance(error, ValueError)
    assert str(error) == "`max_repeats` must be an int in [1, inf); got 0. Pass 1 or more."


def test_require_extra_names_the_install_line():
    with pytest.raises(MissingDependencyError, match=r"pip install 'clusterclip\[ray\]'"):
        require_extra("no_such_module_for_clusterclip", "ray")


def test_import_is_numpy_only():
    code = (
        "import sys, clusterclip, clusterclip.cli; "
        "heavy = [m for m in ('torch', 'faiss', 'sentence_transformers', 'ray', 'pyarrow', "
        "'matplotlib', 'transformers') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_atomic_path_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), workdir.atomic_path(target) as tmp:
        tmp.write_text("new")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with workdir.atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"


def test_manifest_stages_and_upstream_check(tmp_path):
    assert workdir.read_stage(tmp_path, "embed") is None
    with pytest.raises(ClusterClipError, match="no completed `embed` stage.*clusterclip embed"):
        workdir.require_stage(tmp_path, "embed")
    workdir.write_stage(tmp_path, "embed", {"complete": True, "outputs": {"documents": "aa"}})
    assert workdir.require_stage(tmp_path, "embed")["outputs"] == {"documents": "aa"}
    assert workdir.check_upstream(tmp_path, "cluster", {"embed.documents": "aa"}) == []
    changed = workdir.check_upstream(tmp_path, "cluster", {"embed.documents": "bb"})
    assert len(changed) == 1 and "embed.documents changed" in changed[0]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["clusterclip_version"]


def test_corrupt_manifest_is_a_clear_error(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ClusterClipError, match="manifest is not valid JSON"):
        workdir.read_manifest(tmp_path)


def test_fingerprints_depend_on_content_dtype_and_shape(tmp_path):
    a = np.arange(6, dtype=np.int64)
    assert workdir.fingerprint_array(a) == workdir.fingerprint_array(a.copy())
    assert workdir.fingerprint_array(a) != workdir.fingerprint_array(a.astype(np.int32))
    assert workdir.fingerprint_array(a) != workdir.fingerprint_array(a.reshape(2, 3))
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    first = workdir.fingerprint_file(path)
    path.write_bytes(b"abd")
    assert workdir.fingerprint_file(path) != first


def test_sharded_matrix_equals_concatenation(tmp_path):
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((n, 4)).astype(np.float16) for n in (5, 0, 7, 3)]
    for i, part in enumerate(parts):
        np.save(tmp_path / f"part-{i:05d}.npy", part)
    full = np.concatenate(parts)
    matrix = ShardedMatrix.from_directory(tmp_path)
    assert matrix.shape == (15, 4) and len(matrix) == 15 and matrix.dtype == np.float16
    np.testing.assert_array_equal(matrix[:], full)
    np.testing.assert_array_equal(matrix[3:13], full[3:13])
    np.testing.assert_array_equal(matrix[::2], full[::2])
    rows = np.array([14, 0, 6, 5, 4])
    np.testing.assert_array_equal(matrix[rows], full[rows])
    np.testing.assert_array_equal(matrix[-1], full[-1])
    blocks = list(matrix.iter_blocks(4))
    np.testing.assert_array_equal(np.concatenate([b for _, b in blocks]), full)
    assert [s for s, _ in blocks] == [0, 4, 8, 12]
    with pytest.raises(IndexError):
        matrix[15]


def test_sharded_matrix_rejects_mismatched_shards(tmp_path):
    np.save(tmp_path / "part-00000.npy", np.zeros((2, 4), np.float16))
    np.save(tmp_path / "part-00001.npy", np.zeros((2, 5), np.float16))
    with pytest.raises(ClusterClipError, match="disagree on shape"):
        ShardedMatrix.from_directory(tmp_path)
    with pytest.raises(ClusterClipError, match="no embedding shards"):
        ShardedMatrix.from_directory(tmp_path / "missing")


def test_cli_help_lists_commands_and_exits_cleanly(capsys):
    from clusterclip.cli import main

    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0


def test_atomic_files_get_the_umask_mode_not_0600(tmp_path):
    import os

    previous = os.umask(0o022)
    try:
        workdir.atomic_write_bytes(tmp_path / "shared.bin", b"x")
    finally:
        os.umask(previous)
    assert (tmp_path / "shared.bin").stat().st_mode & 0o777 == 0o644
