"""A protoc plugin (CodeGeneratorRequest on stdin, CodeGeneratorResponse on stdout) for gRPC
Python stubs, so `buf generate` can drive them with local tools only.

grpcio-tools ships the gRPC Python generator compiled into its bundled protoc, not as a
protoc-gen-* executable, and buf runs only its own list of protoc built-ins. So this plugin
hands the request's descriptors to that bundled protoc (--descriptor_set_in) and returns what
it writes.
"""

import pathlib
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    )
    with tempfile.TemporaryDirectory() as tmp:
        descriptors = pathlib.Path(tmp, "set.binpb")
        descriptors.write_bytes(
            descriptor_pb2.FileDescriptorSet(file=request.proto_file).SerializeToString()
        )
        out = pathlib.Path(tmp, "out")
        out.mkdir()
        args = ["protoc", f"--descriptor_set_in={descriptors}", f"--grpc_python_out={out}"]
        if request.parameter:
            args[-1] = f"--grpc_python_out={request.parameter}:{out}"
        code = protoc.main([*args, *request.file_to_generate])
        if code != 0:
            response.error = f"grpc_tools.protoc failed with exit code {code}"
        else:
            for path in sorted(out.rglob("*.py")):
                f = response.file.add()
                f.name = path.relative_to(out).as_posix()
                f.content = path.read_text()
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
