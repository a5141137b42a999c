"""Ships conf/ inside the wheel as search/conf.

conf/ sits at the repository root for people reading the repo; a
non-editable install has no repository, so build_py copies the YAML files
next to the package (search/paths.py finds them there). An editable install
reads conf/ in place and needs nothing from here.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithConf(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        source = Path(__file__).resolve().parent / "conf"
        target = Path(self.build_lib) / "search" / "conf"
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildPyWithConf})
