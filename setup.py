"""The egg of this repository's Scrapy project, for scrapyd: what ``scrapyd-deploy`` uploads.

nutchy itself is built from pyproject.toml (hatchling) and installed where scrapyd runs, as any
dependency of a project is. The egg scrapyd runs a job from holds the project: its settings
(``settings/``, named by the ``scrapy: settings`` entry point, which scrapyd reads) and its own
spiders (``spiders/``). Without this file, scrapyd-deploy writes a setup.py of its own, and
setuptools then takes the package's metadata from pyproject.toml, which drops that entry point
(or refuses the file). So the project is described here alone: pyproject.toml is not read.
"""

from setuptools import setup
from setuptools.dist import Distribution


class ProjectEgg(Distribution):
    """A distribution described by setup() alone: setup.cfg is read, pyproject.toml is not."""

    def parse_config_files(self, filenames=None, ignore_option_errors=False):
        if filenames is None:
            filenames = [name for name in self.find_config_files() if not name.endswith(".toml")]
        super().parse_config_files(filenames, ignore_option_errors)


setup(
    distclass=ProjectEgg,
    name="nutchy-project",
    version="1.0",
    packages=["settings", "spiders"],
    entry_points={"scrapy": ["settings = settings"]},
    zip_safe=True,
)
