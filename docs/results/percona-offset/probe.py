"""Where could the ~1.2 B/key between Percona's 16-byte SET figures and membench's come from?

For one server build: start it fresh, read used_memory (the empty instance, as Percona's
baseline), run redis-benchmark -t set -n 1000000 -r 1000000 -d 16 with -c CLIENTS (the same
command stream and key names as valkey-benchmark; -c 50 is both tools' default), then read
used_memory

  after_exit         right after the benchmark exited (its connections closed),
  with_idle_clients  with CLIENTS connections open again, each having sent one SET (what a
                     reading taken while the benchmark's connections were still open would
                     include), right away and after 3 s (the server shrinks idle clients'
                     buffers in its cron).

Prints one JSON line with the readings and bytes per key for each; docs/results.md reads them.
usage: python3 probe.py SERVER CLIENTS
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def command(sock, *args):
    payload = b"*%d\r\n" % len(args)
    for arg in args:
        data = arg.encode()
        payload += b"$%d\r\n%s\r\n" % (len(data), data)
    sock.sendall(payload)
    return read_reply(sock.makefile("rb"))


def read_reply(stream):
    line = stream.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        length = int(rest)
        return None if length < 0 else stream.read(length + 2)[:-2].decode()
    if kind == b"*":
        return [read_reply(stream) for _ in range(int(rest))]
    raise RuntimeError(f"unexpected reply {line!r}")


def used_memory(port):
    with socket.create_connection(("127.0.0.1", port)) as sock:
        info = command(sock, "INFO", "memory")
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return int(fields["used_memory"])


def main():
    server, clients = sys.argv[1], int(sys.argv[2])
    port = 23000 + os.getpid() % 1000
    directory = tempfile.mkdtemp()
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", directory],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.1)
    readings = {"server": server, "clients": clients}
    readings["empty"] = used_memory(port)
    subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "set", "-n", "1000000", "-r", "1000000",
         "-d", "16", "-c", str(clients), "-q"], check=True, stdout=subprocess.DEVNULL)
    readings["after_exit"] = used_memory(port)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        keys = command(sock, "DBSIZE")
    readings["keys"] = keys
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(clients)]
    for sock in idle:
        command(sock, "SET", "key:000000000001", "x" * 16)
    readings["with_idle_clients"] = used_memory(port)
    time.sleep(3)
    readings["with_idle_clients_after_3s"] = used_memory(port)
    for sock in idle:
        sock.close()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
    process.wait(10)
    for reading in ("after_exit", "with_idle_clients", "with_idle_clients_after_3s"):
        readings[f"bytes_per_key_{reading}"] = round((readings[reading] - readings["empty"]) / keys, 3)
    print(json.dumps(readings))


main()
