"""scripts/run_export.py's errors: one line and status 2 for a missing inputs file, a broken
SavedModel or metadata, and it imports only the known ops libraries an export names."""

import json
import os
import sys

import pytest
import tensorflow as tf

from tests.helpers.speech import load_script

run_export = load_script("run_export")


class _Upper(tf.Module):
  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(self, text):
    return {"text": tf.strings.upper(text)}


def _metadata(required_imports=()):
  return {"model": "Test", "signatures": {"serving_default": {
      "inputs": {"text": {"dtype": "string", "shape": [None], "doc": "a sentence"}},
      "outputs": {"text": "the sentence in capitals"},
      "required_imports": list(required_imports)}}}


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
  """A SavedModel with a serving signature and the metadata run.py --mode=export writes."""
  directory = tmp_path_factory.mktemp("export") / "exported"
  module = _Upper()
  tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
  os.makedirs(directory / "assets.extra", exist_ok=True)
  (directory / "assets.extra" / "open_seq2seq.json").write_text(json.dumps(_metadata()))
  return directory


def _copy(export_dir, tmp_path, metadata=None):
  import shutil  # pylint: disable=import-outside-toplevel
  copy = tmp_path / "exported"
  shutil.copytree(export_dir, copy)
  if metadata is not None:
    (copy / "assets.extra" / "open_seq2seq.json").write_text(
        metadata if isinstance(metadata, str) else json.dumps(metadata))
  return copy


def _error(capsys) -> str:
  err = capsys.readouterr().err
  assert err.startswith("error: ") and err.count("\n") == 1, err
  return err


def test_serves_the_inputs(export_dir, tmp_path):
  inputs = tmp_path / "in.txt"
  inputs.write_text("a b\nc\n", encoding="utf-8")
  out = tmp_path / "out.txt"
  assert run_export.main([str(export_dir), str(inputs), "--output", str(out)]) == 0
  assert out.read_text(encoding="utf-8") == "A B\nC\n"


def test_a_missing_inputs_file_is_one_line(export_dir, tmp_path, capsys):
  assert run_export.main([str(export_dir), str(tmp_path / "none.txt")]) == 2
  assert f"inputs file {tmp_path / 'none.txt'} does not exist" in _error(capsys)


def test_a_truncated_saved_model_is_one_line(export_dir, tmp_path, capsys):
  copy = _copy(export_dir, tmp_path)
  graph = copy / "saved_model.pb"
  graph.write_bytes(graph.read_bytes()[:100])
  inputs = tmp_path / "in.txt"
  inputs.write_text("a\n", encoding="utf-8")
  assert run_export.main([str(copy), str(inputs)]) == 2
  err = _error(capsys)
  assert f"{copy}: the SavedModel cannot be loaded" in err and "export the model again" in err


def test_broken_metadata_is_one_line(export_dir, tmp_path, capsys):
  copy = _copy(export_dir, tmp_path, metadata="{not json")
  assert run_export.main([str(copy), str(tmp_path / "in.txt")]) == 2
  assert "not open_seq2seq's export metadata" in _error(capsys)


def test_only_known_ops_libraries_are_imported(export_dir, tmp_path, capsys, monkeypatch):
  # a module that would leave a mark if the export could make the script import it
  marker = tmp_path / "imported"
  (tmp_path / "planted_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  copy = _copy(export_dir, tmp_path, _metadata(["planted_module"]))
  inputs = tmp_path / "in.txt"
  inputs.write_text("a\n", encoding="utf-8")
  assert run_export.main([str(copy), str(inputs)]) == 2
  err = _error(capsys)
  assert "asks to import planted_module, which is not a known ops library" in err
  assert not marker.exists() and "planted_module" not in sys.modules
  assert set(run_export.KNOWN_OPS_LIBRARIES) == {"tensorflow_text"}  # what exports name
