#!/usr/bin/env python3
"""redis_check.py - a verifying Redis client (RESP over TCP, standard library only).

  redis_check.py PORT wait SECS       wait until the server answers PING
  redis_check.py PORT load [MIB]      write a known data set (default ~24 MiB) with
                                      4 connections, read it all back and verify it
  redis_check.py PORT flush           FLUSHALL SYNC, then DBSIZE must be 0
  redis_check.py PORT info            print used_memory and dbsize

The data set: strings of 1 B .. 256 KiB (log-uniform lengths), lists, hashes
and sets, every byte a function of the key, so each value read back is checked
exactly.  Writes are pipelined; each reply is checked (+OK, integer counts).
Output: one line "KEY=VALUE ..." on stdout; exit 0 on success, 1 on any
mismatch or error reply, 2 on connection errors.
"""
import hashlib
import socket
import sys
import threading
import time

CONNS = 4


class RedisError(Exception):
    pass


class Conn:
    """One RESP connection with a buffered reader."""

    def __init__(self, port, timeout=30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def close(self):
        self.sock.close()

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, int):
                a = b"%d" % a
            out.append(b"$%d\r\n" % len(a))
            out.append(a)
            out.append(b"\r\n")
        return b"".join(out)

    def send(self, cmds):
        self.sock.sendall(b"".join(self.encode(*c) for c in cmds))

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise RedisError("connection closed by the server")
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data = bytes(self.buf[:n])
        if self.buf[n : n + 2] != b"\r\n":
            raise RedisError("bulk string not followed by CRLF")
        del self.buf[: n + 2]
        return data

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RedisError("error reply: " + rest.decode(errors="replace"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RedisError("bad reply line %r" % line[:80])

    def call(self, *args):
        self.send([args])
        return self.reply()

    def pipeline(self, cmds):
        self.send(cmds)
        return [self.reply() for _ in cmds]


def blob(tag, n):
    """n bytes derived from tag (SHAKE-256 stream)."""
    return hashlib.shake_256(tag.encode()).digest(n)


def str_len(i):
    """Log-uniform length in 1 B .. 256 KiB, from the key index."""
    h = int.from_bytes(hashlib.blake2b(b"len%d" % i, digest_size=8).digest(), "little")
    band = h % 19  # 2^0 .. 2^18
    lo = 1 << band
    return min(lo + (h >> 8) % lo, 256 * 1024)


def dataset(mib):
    """The keys and expected contents; about mib MiB of string data."""
    strings, total, i = [], 0, 0
    while total < mib << 20:
        n = str_len(i)
        strings.append(("hk:str:%d" % i, n))
        total += n
        i += 1
    lists = [("hk:list:%d" % j, 50 + j % 200) for j in range(200)]
    hashes = [("hk:hash:%d" % j, 20 + j % 100) for j in range(200)]
    sets = [("hk:set:%d" % j, 10 + j % 300) for j in range(200)]
    return strings, lists, hashes, sets


def list_item(key, k):
    return blob("%s/%d" % (key, k), 8 + (k * 37) % 300)


def hash_field(key, k):
    return b"f%d" % k, blob("%s#%d" % (key, k), 4 + (k * 13) % 120)


def set_member(key, k):
    return b"m%d:" % k + blob("%s@%d" % (key, k), 6)


class Worker:
    def __init__(self, port, part):
        self.port, self.part = port, part
        self.error = None
        self.keys = self.bytes = 0

    def run(self):
        try:
            self._run()
        except Exception as e:  # reported by the main thread
            self.error = "%s: %s" % (type(e).__name__, e)

    def _check(self, what, got, want):
        if got != want:
            g = got if not isinstance(got, (bytes, bytearray)) else "%d bytes" % len(got)
            w = want if not isinstance(want, (bytes, bytearray)) else "%d bytes" % len(want)
            raise RedisError("%s: got %s, expected %s" % (what, g, w))

    def _run(self):
        strings, lists, hashes, sets = self.part
        c = Conn(self.port)
        # write, in pipelined batches of 32 commands
        cmds, wants = [], []

        def run():
            if cmds:
                for got, (what, want) in zip(c.pipeline(cmds), wants):
                    self._check(what, got, want)
                cmds.clear()
                wants.clear()

        for key, n in strings:
            cmds.append(("SET", key, blob(key, n)))
            wants.append(("SET " + key, "OK"))
            self.bytes += n
            if len(cmds) >= 32:
                run()
        run()
        for key, n in lists:
            c.call("DEL", key)
            items = [list_item(key, k) for k in range(n)]
            self._check("RPUSH " + key, c.call("RPUSH", key, *items), n)
        for key, n in hashes:
            c.call("DEL", key)
            args = []
            for k in range(n):
                args.extend(hash_field(key, k))
            self._check("HSET " + key, c.call("HSET", key, *args), n)
        for key, n in sets:
            c.call("DEL", key)
            members = [set_member(key, k) for k in range(n)]
            self._check("SADD " + key, c.call("SADD", key, *members), n)
        # read back and verify
        for i in range(0, len(strings), 32):
            part = strings[i : i + 32]
            for (key, n), got in zip(part, c.pipeline([("GET", k) for k, _ in part])):
                self._check("GET " + key, got, blob(key, n))
        for key, n in lists:
            self._check("LRANGE " + key, c.call("LRANGE", key, 0, -1), [list_item(key, k) for k in range(n)])
        for key, n in hashes:
            got = c.call("HGETALL", key)
            self._check("HGETALL " + key, dict(zip(got[0::2], got[1::2])), dict(hash_field(key, k) for k in range(n)))
        for key, n in sets:
            self._check("SMEMBERS " + key, set(c.call("SMEMBERS", key)), {set_member(key, k) for k in range(n)})
        self.keys = len(strings) + len(lists) + len(hashes) + len(sets)
        c.close()


def info_memory(c):
    text = c.call("INFO", "memory").decode()
    return {k: v for k, _, v in (l.partition(":") for l in text.split("\r\n")) if v}


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    port, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "wait":
        end = time.monotonic() + float(sys.argv[3])
        while True:
            try:
                c = Conn(port, timeout=2)
                if c.call("PING") == "PONG":
                    c.close()
                    return 0
                c.close()
            except (OSError, RedisError):
                pass
            if time.monotonic() > end:
                print("redis_check: no server answering PING on port %d" % port, file=sys.stderr)
                return 1
            time.sleep(0.05)  # poll interval, not a synchronisation
    try:
        c = Conn(port)
    except OSError as e:
        print("redis_check: cannot connect to port %d: %s" % (port, e), file=sys.stderr)
        return 2
    try:
        if mode == "load":
            mib = int(sys.argv[3]) if len(sys.argv) > 3 else 24
            strings, lists, hashes, sets = dataset(mib)
            workers = [
                Worker(port, (strings[w::CONNS], lists[w::CONNS], hashes[w::CONNS], sets[w::CONNS]))
                for w in range(CONNS)
            ]
            start = time.monotonic()
            threads = [threading.Thread(target=w.run) for w in workers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            errors = [w.error for w in workers if w.error]
            for e in errors:
                print("redis_check: error: " + e, file=sys.stderr)
            keys = sum(w.keys for w in workers)
            n = c.call("DBSIZE")
            if not errors and n < keys:
                errors.append("DBSIZE %d < %d keys written" % (n, keys))
                print("redis_check: error: " + errors[-1], file=sys.stderr)
            print(
                "LOAD keys=%d string_bytes=%d secs=%.2f dbsize=%d errors=%d"
                % (keys, sum(w.bytes for w in workers), time.monotonic() - start, n, len(errors))
            )
            return 1 if errors else 0
        if mode == "flush":
            c.call("FLUSHALL", "SYNC")
            n = c.call("DBSIZE")
            print("FLUSH dbsize=%d" % n)
            return 0 if n == 0 else 1
        if mode == "info":
            m = info_memory(c)
            print("INFO used_memory=%s dbsize=%d" % (m["used_memory"], c.call("DBSIZE")))
            return 0
    except (OSError, RedisError) as e:
        print("redis_check: error: %s" % e, file=sys.stderr)
        return 1
    finally:
        c.close()
    print("redis_check: unknown mode %r" % mode, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
