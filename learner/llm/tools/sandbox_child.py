"""Runs inside the sandbox child (``python -I -S sandbox_child.py``): guard, then run stdin's code.

Standalone on purpose (stdlib only, no ``learner`` import). Order matters: read the code,
import the allowed modules, *then* install the audit hook, which cannot be removed afterwards
(PEP 578). The hook refuses every socket, process, ``ctypes`` and ``os`` file-system event, and
``open`` / listing / renaming of any path outside the working directory (a fresh temp dir).
New imports after the hook need file reads outside it and so fail too; the preloaded modules
are what user code can import. A final bare expression is printed, as a notebook cell does.
"""

import ast
import os
import sys

ALLOWED_MODULES = (
    "math",
    "cmath",
    "random",
    "itertools",
    "functools",
    "collections",
    "fractions",
    "decimal",
    "statistics",
    "re",
    "json",
    "string",
    "heapq",
    "bisect",
    "operator",
    "datetime",
    "socket",
)  # socket: loaded so that the hook, not a failed import, is what refuses it
DENY_PREFIXES = (
    "socket.",
    "subprocess.",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.kill",
    "os.killpg",
    "os.setuid",
    "os.setgid",
    "ctypes.",
    "pty.",
    "resource.",
    "sys.addaudithook",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "imaplib.",
    "poplib.",
    "nntplib.",
    "webbrowser.",
    "winreg.",
    "msvcrt.",
    "_posixsubprocess.",
    "signal.",
    "os.putenv",
    "os.unsetenv",
    "mmap.",
    "sqlite3.",
)
PATH_EVENTS = {
    "open": (0,),
    "os.listdir": (0,),
    "os.scandir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.replace": (0, 1),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (0, 1),
    "os.symlink": (0, 1),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.chdir": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "os.walk": (0,),
    "glob.glob": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (0, 1),
    "shutil.move": (0, 1),
    "os.listxattr": (0,),
    "os.getxattr": (0,),
}


def _install_guard(root: str) -> None:
    def inside(p: object) -> bool:
        if isinstance(p, int) or p is None:
            return True  # an already-open descriptor (stdio)
        name = os.fsdecode(p)  # type: ignore[arg-type]  # int and None returned above: a path
        path = os.path.realpath(os.path.join(root, name))
        return path == root or path.startswith(root + os.sep)

    def hook(event: str, args: tuple) -> None:
        if event.startswith(DENY_PREFIXES):
            raise PermissionError(f"sandbox: {event} is not allowed")
        idx = PATH_EVENTS.get(event)
        if idx is not None:
            for i in idx:
                if i < len(args) and not inside(args[i]):
                    raise PermissionError(
                        f"sandbox: {event} outside the sandbox directory: {args[i]!r}"
                    )

    sys.addaudithook(hook)


def _run(code: str) -> None:
    tree = ast.parse(code, "<sandbox>", "exec")
    last = tree.body[-1] if tree.body else None
    show = isinstance(last, ast.Expr)
    if show:
        tree.body = tree.body[:-1]
    env = {"__name__": "__main__"}
    exec(compile(tree, "<sandbox>", "exec"), env)
    if show:
        expr = ast.Expression(last.value)  # type: ignore[union-attr]  # show: last is an ast.Expr
        value = eval(compile(expr, "<sandbox>", "eval"), env)
        if value is not None:
            print(repr(value))


def main() -> None:
    code = sys.stdin.read()
    for name in ALLOWED_MODULES:
        __import__(name)
    root = os.path.realpath(os.getcwd())
    _install_guard(root)
    try:
        _run(code)
    except SystemExit:
        raise
    except BaseException as e:  # the message is the observation
        sys.stdout.flush()
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
