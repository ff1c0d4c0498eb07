"""Build of the schedule's compiled loops; everything else is in pyproject.toml.

The extension is optional: where it cannot be built (no C compiler), the
package installs without it and the schedule runs its numpy code, which gives
the same bytes (``clusterclip.schedule.kernels``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "clusterclip.schedule.ckernels",
            sources=["src/clusterclip/schedule/ckernels.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
