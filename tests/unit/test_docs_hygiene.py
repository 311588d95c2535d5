"""The user documentation is for users: every page is reachable from the README, and none
names paths of the machine it was written on."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
MACHINE_PATHS = re.compile(r"/work/|/root/|/tmp/pytest-|/home/\w+/")


def test_no_page_names_paths_of_a_particular_machine():
  found = []
  for path in PAGES + [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "CONTRIBUTING.md")]:
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, 1):
        if MACHINE_PATHS.search(line):
          found.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()[:80]}")
  assert not found, found


def test_every_docs_page_is_linked_from_the_readme():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  unlinked = [os.path.relpath(p, ROOT) for p in PAGES
              if f"({os.path.relpath(p, ROOT)})" not in readme]
  assert not unlinked, unlinked
