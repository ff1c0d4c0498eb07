"""Build of the schedule's compiled loops; everything else is in pyproject.toml.

The extension is optional: where it cannot be built (no C compiler), the
package installs without it and the schedule runs its numpy code, which gives
the same bytes (``clusterclip.schedule.kernels``).
"""

from glob import glob

from setuptools import Extension, setup

CSRC = "src/clusterclip/schedule/csrc"

setup(
    ext_modules=[
        Extension(
            "clusterclip.schedule.ckernels",
            sources=sorted(glob(f"{CSRC}/*.c")),
            depends=sorted(glob(f"{CSRC}/*.h")),
            include_dirs=[CSRC],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
