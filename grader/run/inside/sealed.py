"""Certified code is called, never read.

A worker holds, beside the student's package, the reference's code for the parts the
graded task builds on (grader.run.dependencies.worker_holdings). Student code may call
those parts: that is what they are there for. It must not read them, since what it read
could leave through the report. CPython 3.11 hands out a function's code (its bytecode,
the names it uses, its constants) and a running frame (its code, its locals) through few
doors, and each raises an audit event:

- `object.__getattr__`, raised by the C getters of the attributes CPython restricts: a
  function's `__code__` (and `__defaults__`, `__kwdefaults__`, which hold nothing the
  student's copy lacks), a frame's `f_code`, a generator's, coroutine's and async
  generator's `gi_code`/`gi_frame`, `cr_code`/`cr_frame`, `ag_code`/`ag_frame`, and a
  traceback's `tb_frame`. The getter raises it however it is reached: `getattr` with a
  computed name, `object.__getattribute__`, the descriptor's own `__get__`, `inspect`,
  `dis`;
- `sys._getframe` and `sys._current_frames` (a frame, from which `f_back` climbs);
- `gc.get_referents`, `gc.get_referrers`, `gc.get_objects` (a function's referents are its
  code);
- `sys.settrace`, `sys.setprofile` (a tracer is handed every frame as it runs);
- `sys.addaudithook` (a hook of the student's would be handed each certified module's
  code as the worker executes it).

install() adds, before any student code runs in the process, a hook that refuses these
where they would hand out certified code or a frame that leads to it; an audit hook
cannot be removed. Certified code is what the grader compiled from the reference's
text, under file names `certified/<module>.py`, and it runs only with the globals of the
certified modules, which the worker names to the hook before each module runs
(CERTIFIED_MODULE): a function's or frame's globals tell the hook, without a read of
its own, that most code is none of its business. A frame is handed out only if neither it
nor any frame it climbs to runs certified code or is a generator's (a generator's
frame climbs to whoever resumes it next, which may be called by certified code later).

There is no source to read: the certified parts arrive compiled and leave the request
before any student code can run beside them (grader.run.inside.tasks).

Where a worker serves a group of tasks and holds a part that only some of them build
on, that part's code begins with a guard (`guard_line`): a read of an audited attribute
of a function, made there, whose docstring names the tasks that may use the part. The hook
answers that read from the task whose probe began last, which it takes only from the
function the worker's serving loop calls each probe in, called by the outermost
serving frame (code the student cannot place beneath it), and refuses the call for any
other task. Being inside the part's code, the
guard runs however the part was reached (the student's class, the certified module,
a copy kept from another task's probe).

Every part a worker holds is guarded, and the guard also keeps the course's order: a
task's probes may use any part they hold to set the task up and to read its answer, but
the task's own code may call only the parts the lessons teach before it (a user written
`task/probes` in the docstring). The worker names each graded task's own code to the
hook before any probe runs (OWN_CODE: the student's function and the code defined in
it); when a part guarded so runs, the hook climbs the stack from the part's caller to
the first frame that is either certified code (a part calling a part: allowed) or the
task's own code (refused, and noted for the grader even if the code catches the error).
Frames of neither (the student's helpers, torch, the standard library) are climbed
through, so a helper or a library call between the two hides nothing.
"""

from __future__ import annotations

import _thread
import gc
import sys
import types

CERTIFIED_PREFIX = "certified/"
GUARD = "__hero_guard__"
# CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
_RESUMABLE = 0x20 | 0x80 | 0x100 | 0x200
_CODE = frozenset({"__code__", "f_code", "gi_code", "cr_code", "ag_code"})
_RESUMABLE_FRAME = frozenset({"gi_frame", "cr_frame", "ag_frame"})
_RESTRICTED = _CODE | _RESUMABLE_FRAME | {"tb_frame", "__kwdefaults__"}
_NEVER = {
    "sys._current_frames": "every thread's frame",
    "sys.settrace": "a tracer, which is handed every frame",
    "sys.setprofile": "a profiler, which is handed every frame",
    "gc.get_objects": "every object the collector tracks",
    "gc.get_referrers": "what refers to an object",
    "gc.get_referents": "what an object refers to",
}
# Raised by the worker with a certified module's globals before the module runs, and
# with the task a probe grades as the probe begins (grader.run.inside.tasks.run_probe).
CERTIFIED_MODULE = "hero_transformer.certified_module"
PROBE_STARTS = "hero_transformer.probe_starts"
# Raised by the worker with (task, code objects): the task's own code, as the student wrote it.
OWN_CODE = "hero_transformer.own_code"
PROBES_ONLY = "/probes"  # a guard's user that may run the part from its probes only
_EVENTS = frozenset({"object.__getattr__", "sys._getframe", "sys.addaudithook", CERTIFIED_MODULE, PROBE_STARTS,
                     OWN_CODE, *_NEVER})
# The code allowed to read what the hook refuses the student: readers that keep nothing
# of what they read (the staff's traceback as text, the operator recorder's walk, and
# inspect._has_code_flag, which torch's decorators ask through isgeneratorfunction and
# which lets go of the code before it calls anything), and the installers of the
# grader's own audit hooks. Named here, resolved to code objects when the hook is
# installed (a name that no longer exists trusts nothing).
_READERS = {"grader.run.inside.sealed": ("trace_of", "unpacked_names"),
            "grader.run.inside.op_rules": ("_library_at_work", "_DispatchRecorder.__torch_dispatch__",
                                            "LowPrecision.__torch_dispatch__", "_issued_by_submission"),
            "inspect": ("_has_code_flag",)}
_HOOK_INSTALLERS = {"grader.run.inside.op_rules": ("guard_switches",),
                    "grader.run.inside.syscall_filter": ("refuse_processes",)}

_INSTALLED: list = []


class Sealed(Exception):
    """What the hook refused, for the worker to report as such (grader/run/inside/tasks.py)."""

    def __init__(self, what: str):
        super().__init__(f"{what}: the reference's parts may be called, never read")
        self.what = what


class SealedAttribute(Sealed, AttributeError):
    """A code or frame attribute refused: to code that asks getattr(f, "__code__", None)
    or hasattr, the object has none."""


class SealedFrame(Sealed, ValueError):
    """A frame refused: ValueError, as sys._getframe raises when no frame is there, so
    the standard library's callers (namedtuple, typing, enum) go on without one."""


class NotBuiltOn(Sealed):
    """A certified part called while a task that does not build on it was probed."""


class TaughtLater(Sealed):
    """A certified part called from the graded task's own code where the lessons teach
    that part after the task. `code` is the grader's record of it (a forbidden call)."""

    def __init__(self, part: str):
        super().__init__(f"the reference's {part}, which the lessons teach after this task")
        self.code = {"kind": "taught_later", "name": part}


def guard_line(indent: str, part: str, users) -> str:
    """The lines that begin a guarded part's code: only `users` may run it. Reading the
    `__kwdefaults__` of a function named GUARD raises the audit event; its docstring says
    which part and who may run it. (A function of the student's dressed up so would be
    answered the same way, and what the read gives away is nothing.)"""
    return f'{indent}def {GUARD}(): "{GUARD} {part} {" ".join(sorted(users))}"\n{indent}{GUARD}.__kwdefaults__\n'


def nested_codes(code):
    """A code object and every code object defined inside it."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from nested_codes(constant)


def _named(dotted: dict) -> dict[int, tuple]:
    """{id(code): (code, the globals it runs with)} of the named functions (and the code
    they define inside them), as they are now."""
    found = {}
    for module_name, names in dotted.items():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name in names:
            value = module
            for part in name.split("."):
                value = vars(value).get(part) if isinstance(value, (type, types.ModuleType)) else None
            # Through any wrapper (torch wraps a mode's handler) to the module's own function.
            while value is not None:
                if isinstance(value, types.FunctionType) and value.__globals__ is vars(module):
                    for code in nested_codes(value.__code__):
                        found[id(code)] = (code, value.__globals__)
                value = getattr(value, "__wrapped__", None) or getattr(value, "__func__", None)
    return found


def install(serve_one, run_probe, crossed: set, later: list) -> None:
    """Add the hook (once per process). `serve_one`: the function whose outermost frame
    serves the worker's probes; `run_probe`: the function it calls each probe with, whose
    local `probing` names the task probed now; `crossed`: where a guard that refused
    notes the part, for the grader to answer the probe again in the task's own worker;
    `later`: where a guard that refused a part taught after the task notes its code."""
    if _INSTALLED:
        return
    # Everything the hook uses is bound now, here and in the functions below that build its
    # closures, where no student code has run: module globals and builtins can be replaced
    # later, these closures cannot be reached.
    current: list = [None]  # the task whose probe began last (PROBE_STARTS), None before any
    own_code: dict = {}  # task -> {id(code): code} of the student's own code for it
    # The globals of the certified modules, as the worker loads them (CERTIFIED_MODULE,
    # raised before each one runs): every certified function and frame has one of them,
    # so code of any other is let through without a read of its own. The student's code
    # can add to this set (and so only slow its own reads), never take from it.
    registry: dict = {}
    readers, installers = _named(_READERS), _named(_HOOK_INSTALLERS)
    trusted_globals = {id(known[1]) for known in readers.values()} | {id(known[1]) for known in installers.values()}
    certified, certified_globals, trusted, leads_to_certified = _recognisers(registry, trusted_globals)
    probe_starts, called_by_own_code = _probe_watch(serve_one, run_probe, current, own_code, certified_globals)
    refusal = _refusal(readers, installers, certified, certified_globals, trusted, leads_to_certified, probe_starts)
    sys.addaudithook(_hook(registry, current, own_code, certified, called_by_own_code, refusal, crossed.add,
                           later.append))
    _INSTALLED.append(True)


def _recognisers(registry: dict, trusted_globals: set):
    """(certified, certified_globals, trusted, leads_to_certified): whether a code object
    is certified, whether globals are a certified module's, whether a frame runs one of
    the named trusted functions, and why a frame leads to certified code (None: it does not)."""
    starts, code_type, prefix, resumable = str.startswith, types.CodeType, CERTIFIED_PREFIX, _RESUMABLE
    # The seal's own frames (the hook's, as a refused read's traceback holds it): their
    # locals are what it guards with (the registry of certified globals).
    seal_scope = globals()

    def certified(code) -> bool:
        return type(code) is code_type and starts(code.co_filename, prefix)

    def certified_globals(scope) -> bool:
        return registry.get(id(scope)) is scope

    def trusted(frame, among: dict) -> bool:
        if id(frame.f_globals) not in trusted_globals:
            return False
        known = among.get(id(frame.f_code))
        return known is not None and known[0] is frame.f_code and known[1] is frame.f_globals

    def leads_to_certified(frame):
        while frame is not None:
            if certified_globals(frame.f_globals):
                return "a frame of the reference's code, or of code it called"
            if frame.f_globals is seal_scope:
                return "a frame of the seal's own"
            if frame.f_code.co_flags & resumable:
                return "a generator's frame"
            frame = frame.f_back
        return None

    return certified, certified_globals, trusted, leads_to_certified


def _probe_watch(serve_one, run_probe, current: list, own_code: dict, certified_globals):
    """(probe_starts, called_by_own_code): noting the task whose probe begins, and whether
    a guarded part was called by that task's own code."""
    serving, serving_globals, one_probe, text = serve_one.__code__, serve_one.__globals__, run_probe.__code__, str

    def outermost_serving(frame):
        """The outermost frame of the worker's serving loop below `frame` (told by its
        globals first: reading a frame's code is itself an audited event, for every hook)."""
        found = None
        while frame is not None:
            if frame.f_globals is serving_globals and frame.f_code is serving:
                found = frame
            frame = frame.f_back
        return found

    def probe_starts(task, reader) -> None:
        """A probe begins: taken only from run_probe called by the outermost serving frame
        (no code the student places can stand beneath it), so the task is the grader's."""
        if (reader.f_globals is serving_globals and reader.f_code is one_probe and reader.f_back is not None
                and outermost_serving(reader.f_back) is reader.f_back):
            current[0] = task if type(task) is text else None

    def called_by_own_code(frame, task) -> bool:
        """Whether the nearest frame below `frame` (the part's) that is certified code or
        the task's own code is the task's own. Certified frames are told by their globals,
        so no certified code is read here."""
        mine = own_code.get(task)
        if not mine:
            return False
        frame = frame.f_back
        while frame is not None:
            if certified_globals(frame.f_globals):
                return False
            code = frame.f_code
            if mine.get(id(code)) is code:
                return True
            frame = frame.f_back
        return False

    return probe_starts, called_by_own_code


def _refusal(readers: dict, installers: dict, certified, certified_globals, trusted, leads_to_certified,
             probe_starts):
    """What the hook refuses of an event it does not settle itself: (exception class, what
    was refused), or None."""
    getframe, never, resumable_frame, probe_event = sys._getframe, dict(_NEVER), _RESUMABLE_FRAME, PROBE_STARTS
    sealed, attribute, frame_refused = Sealed, SealedAttribute, SealedFrame

    def refusal(event: str, args):
        # The frame that asked: this function's caller's caller (the hook is called from C).
        if event == "object.__getattr__":
            owner, name = args
            if name == "__code__":
                if not certified_globals(owner.__globals__):
                    return None
                code = owner.__code__
                if not certified(code) or trusted(getframe(2), readers):
                    return None
                return attribute, f"the code of the reference's {code.co_name}"
            if name == "f_code":
                if not certified_globals(owner.f_globals) or trusted(getframe(2), readers):
                    return None
                return attribute, "the code of a frame of the reference's"
            if name in resumable_frame:
                return None if trusted(getframe(2), readers) else (attribute, f"a generator's frame ({name})")
            if name == "tb_frame":
                if trusted(getframe(2), readers):
                    return None
                why = leads_to_certified(owner.tb_frame)
                return (attribute, f"the frame of a traceback: {why}") if why else None
            if certified(getattr(owner, name)):  # gi_code, cr_code, ag_code
                return attribute, "the code of a generator of the reference's"
            return None
        if event == probe_event:
            probe_starts(args[0] if args else None, getframe(2))
            return None
        if event == "sys._getframe":
            if trusted(getframe(2), readers):
                return None
            why = leads_to_certified(args[0])
            return (frame_refused, why) if why else None
        if event == "sys.addaudithook":
            return None if trusted(getframe(2), installers) else (sealed, "an audit hook of the submission's own")
        return sealed, never[event]

    return refusal


def _hook(registry: dict, current: list, own_code: dict, certified, called_by_own_code, refusal, note,
          record_later):
    # Long by the hook it builds, which is one function on purpose (see there).
    """The audit hook: `note` takes a part a guard refused to a task that does not build on
    it, `record_later` the code of a part refused as taught after the task."""
    starts, get_ident, getframe, code_type, text = str.startswith, _thread.get_ident, sys._getframe, types.CodeType, str
    gc_enabled, gc_disable, gc_enable = gc.isenabled, gc.disable, gc.enable
    events, restricted = _EVENTS, _RESTRICTED
    marker_start, guard_name, probes_only = GUARD + " ", GUARD, PROBES_ONLY
    not_built_on, taught_later = NotBuiltOn, TaughtLater
    own_event, registration = OWN_CODE, CERTIFIED_MODULE
    inside: set = set()  # threads inside the hook: the hook's own reads pass
    # id(a guard's docstring) -> (the docstring, the part, the tasks that may run it, the
    # tasks whose probes only may). A guarded part runs for a task that builds on it, or
    # not at all; between two probes the last one's task stands, which gives code running
    # then no more than that probe's code had.
    markers: dict = {}

    def hook(event: str, args) -> None:
        # Left long: every audit event of the process runs it, so its fast paths call no Python function.
        if event not in events:
            return
        if event == "object.__getattr__":
            name = args[1]
            if name not in restricted:
                return
            # Most reads are of code that is not the reference's: told by its globals.
            if name == "f_code":
                if registry.get(id(args[0].f_globals)) is not args[0].f_globals:
                    return
            elif name == "__code__":
                if registry.get(id(args[0].__globals__)) is not args[0].__globals__:
                    return
            elif name == "__kwdefaults__":  # a guard, or nothing to see: no frame, no code read
                owner = args[0]
                marker = owner.__doc__
                known = markers.get(id(marker))
                if known is None or known[0] is not marker:  # (a guard's docstring is never handed out)
                    if registry.get(id(owner.__globals__)) is not owner.__globals__:
                        return
                    named = owner.__name__
                    if type(named) is not text or named != guard_name or type(marker) is not text \
                            or not starts(marker, marker_start):
                        return
                    _, part, *users = marker.split(" ")
                    known = markers[id(marker)] = (
                        marker, part, frozenset(u for u in users if not u.endswith(probes_only)),
                        frozenset(u[:-len(probes_only)] for u in users if u.endswith(probes_only)))
                task = current[0]
                if task in known[2]:
                    return
                if task in known[3]:
                    # The hook's own reads pass, and no collection runs student code meanwhile.
                    me, collecting = get_ident(), gc_enabled()
                    inside.add(me)
                    gc_disable()
                    try:
                        by_own_code = called_by_own_code(getframe(1), task)
                    finally:
                        if collecting:
                            gc_enable()
                        inside.discard(me)
                    if not by_own_code:
                        return
                    refused = taught_later(known[1])
                    record_later(refused.code)
                    raise refused
                if task is not None:
                    note(known[1])
                raise not_built_on(f"the reference's {known[1]}, which {task or 'no task probed now'} does not "
                                   f"build on")
        elif event == registration:
            if args and type(args[0]) is dict:
                registry[id(args[0])] = args[0]
            return
        elif event == own_event:
            # (Anyone may add to a task's own code: it can only refuse more of that code.)
            if len(args) == 2 and type(args[0]) is text and type(args[1]) is tuple:
                mine = own_code.setdefault(args[0], {})
                for code in args[1]:
                    if type(code) is code_type and not certified(code):
                        mine[id(code)] = code
            return
        me = get_ident()
        if me in inside:
            return
        inside.add(me)
        # No collection while the hook holds frames and code: a finalizer run now would
        # run the student's code with the hook's own reads let through.
        collecting = gc_enabled()
        gc_disable()
        try:
            refused = refusal(event, args)
        finally:
            if collecting:
                gc_enable()
            inside.discard(me)
        if refused is not None:
            kind, what = refused
            raise kind(what)  # made outside the window: the class is the student's to reach
    return hook


_UNPACK_SEQUENCE = __import__("dis").opmap["UNPACK_SEQUENCE"]


def unpacked_names(traceback, _sealed=Sealed, _unpack=_UNPACK_SEQUENCE, _starts=str.startswith) -> "int | None":
    """Where the submission's own line raised by unpacking a sequence into names (`n, d =
    x.shape` on a tensor of three axes): how many names, read from the instruction that
    raised, never from the message the code chose. None elsewhere. Like trace_of, it holds
    no frame or code in a name a finalizer could find."""
    found = None
    while traceback is not None:
        try:
            if _starts(traceback.tb_frame.f_code.co_filename, "submission/"):
                instructions, at = traceback.tb_frame.f_code.co_code, traceback.tb_lasti
                found = instructions[at + 1] if 0 <= at < len(instructions) - 1 and instructions[at] == _unpack \
                    else None
        except _sealed:
            pass
        traceback = traceback.tb_next
    return found


def trace_of(traceback, _text=str, _number=int, _sealed=Sealed) -> list[tuple[str, int, str]]:
    """(file, line, function) of every frame a traceback passed through, certified ones
    included (course staff read them), as text: no frame or code object is ever held in
    a name here, where a finalizer's frame could find it. The defaults bind what it
    calls before any student code exists (replacing them is tampering the worker
    reports)."""
    found = []
    while traceback is not None:
        try:
            found.append((_text(traceback.tb_frame.f_code.co_filename), _number(traceback.tb_lineno),
                          _text(traceback.tb_frame.f_code.co_name)))
        except _sealed:
            found.append(("?", _number(traceback.tb_lineno), "?"))
        traceback = traceback.tb_next
    return found
