"""A TCP proxy on loopback that a test switches between faults, in front of a database.

Modes (:meth:`FaultyProxy.set`):

* ``pass``: bytes flow both ways.
* ``refuse``: the listening socket is closed and every open connection is dropped, as a
  server that went down (new connections are refused).
* ``blackhole``: connections are accepted and open ones stay open, but no byte passes either
  way (a silent partition, or a server that hangs). What is held is delivered, in order,
  once the mode is ``pass`` again, as TCP does after a partition heals.
* ``drip``: bytes pass, but ``drip_bytes`` at a time with ``drip_s`` between them (a link
  that all but stopped).

Run as a program it proxies until killed (for measurements by hand):
``python -m tests.faults.tcp_proxy 6543 127.0.0.1:5432`` and ``kill -USR1/-USR2/-HUP PID``
for blackhole / refuse / pass.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Literal

Mode = Literal["pass", "refuse", "blackhole", "drip"]


class FaultyProxy:
    """Forwards ``127.0.0.1:port`` to ``target`` in one of the modes above (``pass`` to begin with).

    Args:
        target: the (host, port) behind the proxy.
        port: the port to listen on; 0 picks a free one (read :attr:`port`).
        drip_bytes: bytes passed at a time in ``drip`` mode.
        drip_s: seconds between them in ``drip`` mode.
    """

    def __init__(self, target: tuple[str, int], port: int = 0, *, drip_bytes: int = 16, drip_s: float = 0.5) -> None:
        self.target = target
        self.port = port
        self.drip_bytes = drip_bytes
        self.drip_s = drip_s
        self.mode: Mode = "pass"
        self.accepted = 0  # connections accepted so far (a test can wait for a client to arrive)
        self._changed = threading.Condition()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._listen()

    # ------------------------------------------------------------ switching

    def set(self, mode: Mode) -> None:
        """Switch to ``mode`` (see the module doc)."""
        with self._changed:
            before, self.mode = self.mode, mode
            if mode == "refuse":
                if self._listener is not None:
                    # shutdown first: a bare close does not wake the thread blocked in accept(),
                    # and the socket would go on listening (queueing connections) until it does
                    with contextlib.suppress(OSError):
                        self._listener.shutdown(socket.SHUT_RDWR)
                    self._listener.close()
                    self._listener = None
                for c in self._conns:
                    with contextlib.suppress(OSError):
                        c.shutdown(socket.SHUT_RDWR)
                    with contextlib.suppress(OSError):
                        c.close()
                self._conns.clear()
            self._changed.notify_all()
        if before == "refuse" and mode != "refuse":
            self._listen()

    def close(self) -> None:
        """Refuse everything from now on (the end of a test)."""
        self.set("refuse")

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, to put in a URL."""
        return f"127.0.0.1:{self.port}"

    # ------------------------------------------------------------ plumbing

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._changed:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._changed:
                self.accepted += 1
                self._conns.append(client)
                self._changed.notify_all()
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _wait_not_blackholed(self) -> Mode:
        with self._changed:
            self._changed.wait_for(lambda: self.mode != "blackhole")
            return self.mode

    def _connect(self, client: socket.socket) -> None:
        # a connection accepted during a blackhole hears nothing until it heals
        if self._wait_not_blackholed() == "refuse":
            with contextlib.suppress(OSError):
                client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            with contextlib.suppress(OSError):
                client.close()
            return
        upstream.settimeout(None)  # idle pooled connections must not time out
        with self._changed:
            if self.mode == "refuse":
                upstream.close()
                return
            self._conns.append(upstream)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if self._wait_not_blackholed() == "refuse":
                    return
                self._send(dst, data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()

    def _send(self, dst: socket.socket, data: bytes) -> None:
        while data:
            if self.mode != "drip":
                dst.sendall(data)
                return
            dst.sendall(data[: self.drip_bytes])
            data = data[self.drip_bytes :]
            with self._changed:  # a switch out of drip ends the pause at once
                self._changed.wait_for(lambda: self.mode != "drip", timeout=self.drip_s)
            if self._wait_not_blackholed() == "refuse":
                raise OSError("refused")


def _main() -> None:
    import signal
    import sys

    port, target = int(sys.argv[1]), sys.argv[2]
    host, _, target_port = target.rpartition(":")
    proxy = FaultyProxy((host, int(target_port)), port)
    signal.signal(signal.SIGUSR1, lambda *_: proxy.set("blackhole"))
    signal.signal(signal.SIGUSR2, lambda *_: proxy.set("refuse"))
    signal.signal(signal.SIGHUP, lambda *_: proxy.set("pass"))
    print(f"proxy 127.0.0.1:{proxy.port} -> {target} (pid {__import__('os').getpid()})", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    _main()
