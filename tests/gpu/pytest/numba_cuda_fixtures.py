"""What numba-cuda's tests take from the conftest.py at the root of numba-cuda's repository,
which its wheel does not install: a class fixture its test cases use, here set to never dump
reproducers of failed FileCheck tests. Loaded with `-p numba_cuda_fixtures` (run.py)."""
import pytest


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    request.cls._dump_failed_filechecks = False
