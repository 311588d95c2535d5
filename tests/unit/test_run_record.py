"""git.txt / git.diff of the run record: tracked changes are diffed, untracked files counted."""

import subprocess

from open_seq2seq.run_record import git_texts


def _git(repo, *args):
  subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_untracked_files_are_counted_and_tracked_changes_diffed(tmp_path):
  repo = tmp_path / "repo"
  repo.mkdir()
  _git(repo, "init", "-q")
  _git(repo, "config", "user.email", "t@example.invalid")
  _git(repo, "config", "user.name", "t")
  (repo / "code.py").write_text("a = 1\n")
  _git(repo, "add", "code.py")
  _git(repo, "commit", "-qm", "one")
  summary, diff = git_texts([str(repo / "code.py")])
  assert "uncommitted changes: none" in summary and "untracked files or folders: 0" in summary
  assert diff == ""
  (repo / "data").mkdir()
  (repo / "data" / "corpus.txt").write_text("words\n")
  summary, diff = git_texts([str(repo / "code.py")])
  assert "uncommitted changes: none" in summary and "untracked files or folders: 1" in summary
  assert diff == ""  # nothing tracked changed: no diff, and none is promised
  (repo / "code.py").write_text("a = 2\n")
  summary, diff = git_texts([str(repo / "code.py")])
  assert "uncommitted changes: yes" in summary
  assert "-a = 1" in diff and "+a = 2" in diff


def test_outside_a_work_tree(tmp_path):
  (tmp_path / "config.py").write_text("x = 1\n")
  summary, diff = git_texts([str(tmp_path / "config.py")])
  assert summary == "not in a git work tree\n" and diff == ""
