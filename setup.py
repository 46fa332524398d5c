"""The one compiled part: the trace scanner (hpcprof_kit/traces/read/_scan.c). It is optional:
without a C compiler the install still succeeds and the loader decodes every slice with msgspec."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hpcprof_kit.traces.read._scan",
            ["hpcprof_kit/traces/read/_scan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
