# The clients serve_tty.sh drives runbox serve with: an NDJSON stream read line by line (or
# dropped after its first line), and `runbox exec` under a pty (pty.fork) resized mid-way.
import fcntl, http.client, json, os, pty, socket, struct, sys, termios, time


class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("runbox", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(self.path)


def stream(sock, url, accept, first_only):
    """Prints each line as [seconds since the request, line]; with first_only, hangs up after it."""
    c = Unix(sock)
    t0 = time.monotonic()
    c.request("GET", url, headers={"Accept": "application/x-ndjson"} if accept else {})
    r = c.getresponse()
    print(json.dumps({"status": r.status, "type": r.getheader("Content-Type"),
                      "chunked": r.getheader("Transfer-Encoding")}), flush=True)
    while True:
        line = r.readline()
        if not line:
            break
        print(json.dumps([round(time.monotonic() - t0, 3), json.loads(line)]), flush=True)
        if first_only:
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
            return


def under_pty(argv, rows, cols, resize_to):
    """Runs argv on a pty of rows x cols; once it printed its first size, resizes the pty to
    resize_to (0: no resize) and types a newline; prints what it printed and its exit code."""
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execvp(argv[0], argv)
    out = b""
    end = time.monotonic() + 60
    resized = False
    while time.monotonic() < end:
        try:
            b = os.read(fd, 4096)
        except OSError:
            break
        if not b:
            break
        out += b
        if resize_to and not resized and b"%d %d" % (rows, cols) in out:
            resized = True
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", resize_to[0], resize_to[1], 0, 0))
            time.sleep(1)
            os.write(fd, b"\r")
    _, st = os.waitpid(pid, 0)
    print(json.dumps({"out": out.decode(errors="replace"), "exit": os.waitstatus_to_exitcode(st)}))


if __name__ == "__main__":
    if sys.argv[1] == "stream":
        stream(sys.argv[2], sys.argv[3], sys.argv[4] == "accept", sys.argv[5] == "first")
    else:
        rs = sys.argv[4]
        under_pty(sys.argv[5:], int(sys.argv[2]), int(sys.argv[3]),
                  tuple(int(x) for x in rs.split("x")) if rs != "0" else None)
