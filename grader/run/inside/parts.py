"""Certified parts that run apart: the worker holds their guard and a call across, never
their code.

A certified part runs in a process of its own, the parts' process, where everything it
calls is held too and what it takes and changes can be carried as data (Task.crosses;
grader/run/worker_session.py, runs_apart). The grader starts that process beside a
worker the first time a probe calls such a part. No student code runs there, and the
worker holds nothing of the part for a signal handler, the collector or a read of memory
to find: its code in the worker is a stub, `return __hero_part__("gelu", {"x": x})`
(grader/run/reference.py, _called_across), which begins with the part's guard like any
certified part's (grader/run/inside/sealed.py), so the course's order and a group's tasks
hold as before.

A call crosses by value, by way of the grader, which checks every message as it passes
(grader/run/worker.py):

- the worker packs the arguments (`Packer`): numbers, strings, tensors of torch's own
  classes (with their gradients), lists, tuples, dicts, a torch.Generator by its state,
  and objects of the package's classes and of torch.nn's by their tensors, submodules
  and settings; an object or tensor met twice is packed once, so what is shared stays
  shared. torch's random state goes with them;
- the parts' process rebuilds them on its own classes, runs the part's region, and
  answers with the result and with what the part changed: tensors changed in place,
  gradients set or cleared, attributes set or deleted on the objects it was given,
  generators and torch's random state moved on. What it answers that it was given is
  named by number, never copied;
- the worker applies the changes to its own objects, and where autograd wants the
  part's gradient (an input requires one and grad mode is on), the result's new tensors
  are a node of the graph whose backward crosses too: the parts' process runs the part
  again on the same values and random state, and returns the gradients asked for.

Chapter 00's scalar Values cross node by node (Packer._values): data, grad, local
gradients and children by number, each node once per probe, then by key. A list or dict
of them is kept by key while unchanged (Packer._container); forward's and a layer's
answers leave their graph in the parts' process, the worker's nodes of them ghosts
(Packer._ghost) that backward across finds by key (Task.walks_graph); and a part whose
answer depends on numbers only is asked once per probe for the same numbers
(_numbers_asked, Task.numbers_only).
"""

from __future__ import annotations

import functools
import math
import types

from grader.run.inside import wire
from grader.run.inside.messages import PartCall, PartReply, PartsRequest

STUDENT_PACKAGE, CERTIFIED_PACKAGE = "hero_transformer", "_certified_hero_transformer"
# The name under which a certified module finds call_part: set in its globals before it runs.
CALL_ACROSS = "__hero_part__"
# The parts' process runs a part's region as a function of its own, named so; a region it
# does not hold raises NOT_HELD there.
REGION_FUNCTION, NOT_HELD = "__hero_region__", "HeroPartNotHeld"
# Tags of packed values that JSON has no word for.
TUPLE, DICT, ITER, TENSOR, VIEW, OBJECT, MODULE, GENERATOR, DTYPE, SAME, GIVEN, KEPT_OBJECT = (
    "__tuple__", "__dict__", "__iter__", "__t__", "__view__", "__object__", "__torch_module__", "__generator__",
    "__dtype__", "__same__", "__given__", "__kept_object__")
# Chapter 00's scalar Values: one node of the graph (VALUE), or the new nodes a value
# brings, children first (VALUES).
VALUE, VALUES = "__value__", "__values__"
# A list or dict of them sent whole and kept under a key (CONTAINER), or named by that key
# while it holds the same Values with the same data and grads (KEPT_CONTAINER).
CONTAINER, KEPT_CONTAINER = "__container__", "__kept_container__"
# A list of Values all kept, by their keys, data and grads (Packer._kept_row).
KEPT_ROW = "__kept_row__"
# The fewest Values a container holds to be kept: smaller ones are sent each time.
KEPT_CONTAINER_SIZE = 16
# The class chapter 00's graph is made of (module, qualified name): its objects cross node
# by node (Packer._values), never through their attributes.
VALUE_CLASS = ("micro", "Value")
_TORCH_MODULES = "torch.nn.modules."


class CannotCross(TypeError):
    """A value a certified part running apart cannot be given: said in the student's terms
    (the grader words it by its class, Cause.CANNOT_CROSS, never by its message)."""


class TooLargeToCross(CannotCross):
    """Values, or a part's answer, over the wire's limits (wire.TOO_LARGE): the upload's
    weight, its own failure (Cause.TOO_LARGE_TO_CROSS)."""


# ----------------------------------------------------------------------- packing


class Packer:
    """Values as plain data, each tensor and object numbered as first met (met again: a
    reference to its number). `given`: the values of a call's arguments, by id, which an
    answer names by their number instead of copying them."""

    def __init__(self, given: "dict | None" = None, skip_uncrossable: bool = False, views: "dict | None" = None,
                 kept: "dict | None" = None, kept_objects: "dict | None" = None, keeps: "dict | None" = None):
        self.views = views or {}  # the storage of each tensor given, by address: an answer's views of them
        # In the worker: the tensors the parts' process keeps from earlier calls of this probe
        # ({id: (key, tensor, stamp)}), and the objects ({id: (key, object, packed state)}):
        # one unchanged since is named by its key, not sent.
        self.kept, self.kept_objects = kept, kept_objects
        # In the parts' process: where the new tensors of an answer are kept, by key, for the
        # worker to name them in later calls (None: none kept). `keeping` is off for copies.
        self.keeps, self.keeping = keeps, True
        self.fresh = 0  # values sent whole so far, or named by their number (SAME): see _object
        self.spans: dict = {}  # object's number -> the first number after all it holds
        self.tensors: list = []
        self.objects: list = []
        self.seen: dict = {}
        self.given = given or {}
        self.named_given: set = set()  # the numbers of the given values named (GIVEN)
        self.skip = skip_uncrossable  # an attribute that cannot cross is left behind, not refused
        # Chapter 00's Values: in the worker, those the parts' process keeps from earlier calls
        # ({id: (key, value, children, local grads)}), and what they are by key; in the parts'
        # process, the keys of the Values it keeps ({id: key}). `whole_graphs`: every node below
        # a Value is sent (a part that walks the graph, backward), not only the new ones.
        self.kept_values: "dict | None" = None
        self.value_keys: "dict | None" = None
        self.whole_graphs = False
        # In the parts' process's answers: a new Value whose children are new too is sent
        # without them (a ghost): its graph stays there, named by its key (Packer._ghost).
        self.ghosts = False
        self.sent_new: set = set()
        self.whole_containers: set = set()  # ids of the containers being sent whole
        self.budget = wire.Budget()
        self.keep: list = []  # what was packed, alive until the call ends (ids stay theirs)

    def pack(self, value, depth: int = 0):
        import torch

        kind = type(value)
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            return value if value - value == 0 else {"__float__": repr(value)}
        if id(value) in self.given:
            self.named_given.add(self.given[id(value)])
            return {GIVEN: self.given[id(value)]}
        if id(value) in self.seen:
            self.fresh += 1
            return {SAME: self.seen[id(value)]}
        if depth > 48:
            raise CannotCross("values nested more than 48 deep")
        self._spend(containers=1)
        if (kind is list or kind is dict) and self.kept_values is not None and not self.whole_graphs:
            kept = self._container(value)
            if kept is not None:
                return kept
        if kind is list:
            if self.kept_values is not None and not self.whole_graphs and len(value) >= KEPT_CONTAINER_SIZE:
                row = self._kept_row(value)
                if row is not None:
                    return row
            return [self.pack(item, depth + 1) for item in value]
        if kind is tuple or kind is torch.Size:
            return {TUPLE: [self.pack(item, depth + 1) for item in value]}
        if kind is dict:
            return {DICT: [[self.pack(k, depth + 1), self.pack(v, depth + 1)] for k, v in value.items()]}
        if kind is torch.dtype:
            return {DTYPE: str(value).removeprefix("torch.")}
        if kind is torch.Tensor or kind is torch.nn.Parameter:
            return self._tensor(value, kind, depth)
        if kind is torch.Generator:
            self.fresh += 1
            return {GENERATOR: [self._number(value, self.objects), value.get_state()]}
        if isinstance(value, (types.GeneratorType, map, filter, zip, enumerate)) or kind.__name__.endswith("iterator"):
            # Consumed here as the part would consume it: a parameters() generator, most often.
            return {ITER: [self.pack(item, depth + 1) for item in value]}
        module = getattr(kind, "__module__", None)
        if _in_package(module):
            if _value_lineage(kind) is not None:
                return self._values(value)
            number = self._number(value, self.objects)
            # Its class and the package's classes it derives from, nearest first: the other
            # side rebuilds it on the first it has (a class of the student's own that derives
            # from the course's LayerNorm is a LayerNorm there).
            lineage = [[_short(base.__module__), base.__qualname__] for base in kind.__mro__
                       if _in_package(getattr(base, "__module__", None))]
            return self._object(value, number, lambda state: {OBJECT: [number, lineage, state]}, depth)
        if isinstance(module, str) and module.startswith(_TORCH_MODULES) and isinstance(value, torch.nn.Module):
            number = self._number(value, self.objects)
            return self._object(value, number, lambda state: {MODULE: [number, module, kind.__qualname__, state]},
                                depth)
        raise CannotCross(f"a {kind.__name__}: the course's own parts take tensors, numbers, strings, lists, tuples "
                          f"and dicts of those, generators of torch, and the package's and torch.nn's objects")

    def _object(self, value, number: int, packed, depth: int) -> dict:
        """An object packed by its state, or, where the parts' process keeps it from an
        earlier call of this probe and it packs exactly as it did then, named by its key:
        its state is read either way (what changed since must be seen), but sent and
        rebuilt only when changed. An object whose state sends anything whole (a tensor
        changed) or names a value met earlier in the call (SAME: the kept one would hold
        its own) is sent whole."""
        fresh = self.fresh
        whole = packed(self._state(value, depth))
        # The numbers given within it (itself and all it holds): what a change the call
        # reports must reach to make it stale (call_part, _stale).
        self.spans[number] = len(self.tensors) + len(self.objects)
        if self.kept_objects is None or self.fresh != fresh:
            return whole
        known = self.kept_objects.get(id(value))
        if known is not None and known[1] is value and known[2] == whole:
            return {KEPT_OBJECT: [number, known[0]]}
        key = KEPT_KEYS[0] = KEPT_KEYS[0] + 1
        self.kept_objects[id(value)] = (key, value, whole)
        return {**whole, "keep": key}

    def _values(self, root) -> dict:
        """A chapter 00 Value and the nodes below it that the other side does not have yet,
        children first, each a node of its own (never nested: a graph may be thousands
        deep). A node the other side keeps from an earlier call of this probe, built of the
        same children, is named by its key; its data and grad are always sent (they are
        what code changes: Adam's step, a zero_grad). `whole_graphs`: its nodes are sent
        too, every one of the graph (a part that walks it reads and sets them all)."""
        if self.ghosts:
            return self._ghost(root)
        records, order, stack, met = [], [], [(root, False)], set()
        while stack:
            node, below_done = stack.pop()
            if below_done:
                order.append(node)
                continue
            if id(node) in met or id(node) in self.seen or id(node) in self.given:
                continue
            met.add(id(node))
            stack.append((node, True))
            if self.whole_graphs or self._kept_value(node) is None:
                for child in reversed(tuple(getattr(node, "_children", ()))):
                    # (A kept child, in a part that does not walk the graph, is named by its key.)
                    if id(child) not in met and _value_lineage(type(child)) is not None \
                            and (self.whole_graphs or self._kept_value(child) is None):
                        stack.append((child, False))
        for node in order:
            records.append(self._node(node))
        if not records:
            return self.pack(root)
        return records[0] if len(records) == 1 else {VALUES: records}

    def _ghost(self, node) -> dict:
        """A Value of an answer of the parts' process: sent with its children where all of them
        are values the worker has (an operation's result: its operands), else as a ghost,
        with its data and grad only. The graph below a ghost stays here, kept: what walks it
        (backward, called across) finds it by the ghost's key; what the worker's code reads
        of it is its data."""
        key = self._kept_value(node)
        if key is None:
            for child in tuple(getattr(node, "_children", ())):
                if id(child) not in self.given and id(child) not in self.seen and self._kept_value(child) is None:
                    return self._node(node, ghost=True)
        return self._node(node)

    def _container(self, value) -> "dict | None":
        """A list or dict of chapter 00's Values (a model's tables, its cache) named by the key
        the parts' process keeps it by, where it holds the same Values, with the same data
        and grads, as when sent; else sent whole to be kept (None: too small, or it holds
        something other than Values, numbers and containers of them)."""
        if id(value) in self.whole_containers:
            return None
        signature = _graph_signature(value)
        if signature is None or signature[1] < KEPT_CONTAINER_SIZE:
            return None
        known = KEPT_CONTAINERS.get(id(value))
        if known is not None and known[1] is value and known[2] == signature[0]:
            return {KEPT_CONTAINER: known[0]}
        self.whole_containers.add(id(value))
        whole = self.pack(value)
        key = KEPT_KEYS[0] = KEPT_KEYS[0] + 1
        KEPT_CONTAINERS[id(value)] = (key, value, signature[0], signature[2])
        return {CONTAINER: [key, whole]}

    def _child(self, child):
        """A child of a node sent: a number (this call's values from 0 up, a value the call
        was given below 0), or a given value's name."""
        if _value_lineage(type(child)) is None:
            raise CannotCross(f"a Value whose children are not all Values (one is a {type(child).__name__})")
        if id(child) in self.given:
            number = self.given[id(child)]
            self.named_given.add(number)
            return -1 - number if type(number) is int else {GIVEN: number}
        if id(child) in self.seen:
            return self.seen[id(child)]
        return {"k": self._kept_value(child)}

    def _kept_row(self, values: list) -> "dict | None":
        """A list of Values the other side keeps (those sent earlier in this call too, kept as
        they arrived): their keys, data and grads as three lists (a model's parameters, sent
        again after a step)."""
        keys, data, grads = [], [], []
        for node in values:
            key = self._kept_value(node) if _value_lineage(type(node)) is not None else None
            if key is None or id(node) in self.given:
                return None
            value, grad = getattr(node, "data", None), getattr(node, "grad", None)
            if type(value) is not float or type(grad) is not float or value - value != 0 or grad - grad != 0:
                return None
            keys.append(key)
            data.append(value)
            grads.append(grad)
        for node in values:
            _synced(node)
        self._spend(containers=1)
        return {KEPT_ROW: [keys, data, grads]}

    def _kept_value(self, node):
        """The key the other side keeps `node` by, where it is built as it was then."""
        if self.kept_values is not None:
            known = self.kept_values.get(id(node))
            if known is not None and known[1] is node and getattr(node, "_children", None) is known[2] \
                    and getattr(node, "_local_grads", None) is known[3]:
                return known[0]
        elif self.value_keys is not None:
            return self.value_keys.get(id(node))
        return None

    def _node(self, node, ghost: bool = False) -> dict:
        self._spend(containers=1)
        key = self._kept_value(node)
        if key is not None and self.whole_graphs:
            # Kept, but a node below it was sent anew: the other side rebuilds it on that one.
            if any(id(child) in self.sent_new for child in tuple(getattr(node, "_children", ()))):
                key = None
        number = self._number(node, self.objects)
        data, grad = self.pack(getattr(node, "data", None)), self.pack(getattr(node, "grad", None))
        if key is not None:
            if self.kept_values is not None:
                _synced(node)
            return {VALUE: [number, key, data, grad]}
        self.fresh += 1
        self.sent_new.add(id(node))
        children = tuple(getattr(node, "_children", ()))
        local_grads = tuple(getattr(node, "_local_grads", ()))
        record = {VALUE: [number, _value_lineage(type(node)), data, grad, None, None] if ghost else
                  [number, _value_lineage(type(node)), data, grad, [self._child(child) for child in children],
                   [self.pack(g) for g in local_grads]]}
        if self.kept_values is not None:
            key = KEPT_KEYS[0] = KEPT_KEYS[0] + 1
            _keep_value(key, node)
            record["keep"] = key
        elif self.value_keys is not None and self.keeping:
            key = _PARTS_KEYS[0] = _PARTS_KEYS[0] - 1
            _keep_part_value(key, node)
            _SENT_VALUES.add(key)
            record["keep"] = key
        return record

    def _number(self, value, table: list) -> int:
        number = len(self.tensors) + len(self.objects)
        table.append(value)
        self.seen[id(value)] = number
        self.keep.append(value)
        return number

    def _spend(self, containers: int = 0, tensor_bytes: int = 0) -> None:
        try:
            self.budget.spend(containers=containers, tensor_bytes=tensor_bytes)
        except wire.OverBudget:
            raise TooLargeToCross(f"values of {wire.TOO_LARGE}") from None

    def _tensor(self, value, kind, depth: int) -> dict:
        """A tensor by its values, with its layout where it is not the plain one (a view, a
        transpose: code that reads its strides, as .view() does, meets the same ones), or,
        in an answer, as a view of a tensor the call was given."""
        layout = [value.storage_offset(), list(value.shape), list(value.stride())]
        given = self.views.get(value.untyped_storage().data_ptr()) if value.numel() else None
        if given is not None:
            return {VIEW: [given, *layout]}
        number = self._number(value, self.tensors)
        grad = value.grad if value.is_leaf else None
        # Whether it requires a gradient, said of a leaf only: a tensor computed in the parts'
        # process is a leaf where it arrives, joined to the graph there by call_part.
        packed = {TENSOR: number, "p": kind is not type(value.detach()), "g": bool(value.requires_grad and value.is_leaf),
                  "grad": None if grad is None else self.pack(grad, depth + 1)}
        if self.kept is not None:
            stamp = _stamp(value)
            known = self.kept.get(id(value))
            if known is not None and known[1] is value and known[2] == stamp:
                return {**packed, "kept": known[0]}
            key = KEPT_KEYS[0] = KEPT_KEYS[0] + 1
            self.kept[id(value)] = (key, value, stamp)
            packed["keep"] = key
        elif self.keeps is not None and self.keeping:
            # Kept here under a key of the parts' process's own (negative: never the worker's).
            key = _PARTS_KEYS[0] = _PARTS_KEYS[0] - 1
            self.keeps[key] = value.detach()
            packed["keep"] = key
        self.fresh += 1
        elements = value.untyped_storage().nbytes() // max(1, value.element_size())
        plain = value.is_contiguous() and value.storage_offset() == 0 and value.numel() == elements
        values = value.detach() if plain else value.detach().as_strided((elements,), (1,), 0)
        self._spend(tensor_bytes=values.numel() * values.element_size())
        return {**packed, "v": values, "layout": None if plain else layout}

    def _state(self, value, depth: int) -> dict:
        """An object as a part reads it: an nn.Module's parameters, buffers and submodules,
        and its other attributes; nothing of the object's own code runs (its dict is read
        directly). Where `skip`, an attribute that cannot cross is left behind (no part
        that runs apart reads a function or a file its object holds)."""
        import torch

        attributes = object.__getattribute__(value, "__dict__")
        if type(attributes) is not dict:
            raise CannotCross(f"a {type(value).__name__} whose __dict__ is not a dict")
        state: dict = {"attributes": {}}
        if isinstance(value, torch.nn.Module):
            for key in ("parameters", "buffers", "modules"):
                registry = attributes.get(f"_{key}", {})
                # (None too: a Linear without bias registers its bias as None.)
                state[key] = {name: self.pack(item, depth + 1) for name, item in dict.items(registry)
                              if type(name) is str}
        for name, item in list(dict.items(attributes)):
            if type(name) is not str or (name.startswith("_") and isinstance(value, torch.nn.Module)):
                continue
            try:
                state["attributes"][name] = self.pack(item, depth + 1)
            except CannotCross:
                if not self.skip:
                    raise
        return state


class Unpacker:
    """Packed values rebuilt. `modules`: the package's modules (short name -> module) whose
    classes objects are rebuilt on; `given`: the call's arguments by number (an answer's
    references to them); `grad_of`: numbers of tensors made leaves that require a gradient."""

    def __init__(self, modules, given: "dict | None" = None, grad_of=(), kept: "dict | None" = None,
                 copies: bool = False, kept_objects: "dict | None" = None, register=None,
                 kept_values: "dict | None" = None, keep_value=None):
        # (`modules` may be a function that finds them: read only where an object comes.)
        self._modules, self.given, self.grad_of = modules, given or {}, set(grad_of)
        # In the parts' process: the tensors kept from earlier calls, by key, and the objects
        # ({key: (packed, object, what its unpacking made)}); `copies`: use copies of them
        # (a gradient's run, or a run again, must change none of them).
        self.kept, self.copies = kept if kept is not None else {}, copies or bool(grad_of)
        self.kept_objects = kept_objects if kept_objects is not None else {}
        # In the worker: called with (key, tensor) for each tensor the parts' process keeps.
        self.register = register
        # Chapter 00's Values kept by key (on this side: the worker's, or the parts' process's),
        # and what keeps a new one the other side asks to be kept (None: none is kept).
        self.kept_values = kept_values if kept_values is not None else {}
        self.keep_value = keep_value
        self.kept_containers = _KEPT_CONTAINERS  # (the parts' process's: only it keeps containers)
        self.containers: list = []  # (key, container) of those this call names or sends to keep
        self.outer = False  # `given` are the values of the call this one calls back from
        self.made: dict = {}  # number -> what was rebuilt
        self.views: set = set()  # ids of the views of given tensors made (autograd sees through them)

    @property
    def modules(self) -> dict:
        if callable(self._modules):
            self._modules = self._modules()
        return self._modules

    def unpack(self, data):
        import torch

        if isinstance(data, list):
            return [self.unpack(item) for item in data]
        if not isinstance(data, dict):
            return data
        if TUPLE in data:
            return tuple(self.unpack(item) for item in data[TUPLE])
        if DICT in data:
            return {self.unpack(k): self.unpack(v) for k, v in data[DICT]}
        if ITER in data:
            return iter([self.unpack(item) for item in data[ITER]])
        if SAME in data:
            return self.made[data[SAME]]
        if GIVEN in data:
            value = self.given.get(data[GIVEN]) if isinstance(data[GIVEN], (int, str)) else None
            if value is None:
                raise wire.WireError(f"no given value {str(data[GIVEN])[:20]}")
            if self.outer:  # a call back's argument that the call it answers was given: named so in the answer
                self.made[_outer(data[GIVEN])] = value
            return value
        if DTYPE in data:
            dtype = getattr(torch, str(data[DTYPE]), None)
            if not isinstance(dtype, torch.dtype):
                raise wire.WireError(f"no dtype {data[DTYPE]!r}")
            return dtype
        if TENSOR in data:
            return self._tensor(data)
        if VIEW in data:
            number, offset, size, stride = data[VIEW]
            view = self.given[number].as_strided(size, stride, offset)
            self.views.add(id(view))
            return view
        if GENERATOR in data:
            number, state = data[GENERATOR]
            generator = torch.Generator()
            generator.set_state(state)
            self.made[number] = generator
            return generator
        if CONTAINER in data:
            key, whole = data[CONTAINER] if isinstance(data[CONTAINER], list) and len(data[CONTAINER]) == 2 \
                else (None, None)
            if not isinstance(key, int) or not isinstance(whole, (list, dict)):
                raise wire.WireError("a container to keep not as containers are sent")
            made = self.unpack(whole)
            if not isinstance(made, (list, dict)):
                raise wire.WireError("a container to keep that is no list or dict")
            if self.keep_value is not None:
                self.kept_containers[key] = made
            self.containers.append((key, made))
            return made
        if KEPT_CONTAINER in data:
            key = data[KEPT_CONTAINER]
            made = self.kept_containers.get(key) if isinstance(key, int) else None
            if made is None:
                raise wire.WireError("a container kept from an earlier call is no longer kept")
            self.containers.append((key, made))
            return made
        if KEPT_ROW in data:
            return self._kept_row(data[KEPT_ROW])
        if VALUES in data:
            records = data[VALUES]
            if not isinstance(records, list) or not records:
                raise wire.WireError("nodes of a graph without any node")
            for record in records:
                made = self.unpack(record) if isinstance(record, dict) and VALUE in record else None
                if made is None:
                    raise wire.WireError("nodes of a graph that are no node")
            return made
        if VALUE in data:
            return self._value(data)
        if OBJECT in data or MODULE in data:
            return self._kept_object(data)
        if KEPT_OBJECT in data:
            number, key = data[KEPT_OBJECT]
            known = self.kept_objects.get(key)
            if known is None:
                raise wire.WireError("an object kept from an earlier call is no longer kept")
            packed, made, subtree = known
            if self.copies:  # rebuilt anew from what was sent, its tensors copies
                return self.unpack(packed)
            self.made.update(subtree)
            return made
        return data

    def _value(self, data):
        """A node of chapter 00's graph (Packer._values): one kept from an earlier call, with
        its data and grad as they are now, or a new one made by this side's Value(data,
        children, local_grads) (in the worker, the code's own class, as the part's code
        would have made it there)."""
        fields = data[VALUE]
        if not isinstance(fields, list) or len(fields) not in (4, 6) or not isinstance(fields[0], int):
            raise wire.WireError("a node of a graph not as nodes are sent")
        number, value, grad = fields[0], self.unpack(fields[2]), self.unpack(fields[3])
        if len(fields) == 4:
            node = self.kept_values.get(fields[1]) if isinstance(fields[1], int) else None
            if node is None:
                raise wire.WireError("a Value kept from an earlier call is no longer kept")
            for name, now in (("data", value), ("grad", grad)):
                if getattr(node, name, None) != now:
                    setattr(node, name, now)
        else:
            lineage, children, local_grads = fields[1], fields[4], fields[5]
            owner = self._class_of(lineage) if isinstance(lineage, list) else None
            if children is None and local_grads is None and isinstance(data.get("keep"), int):
                children = local_grads = []  # a ghost: its graph stays in the parts' process
            if owner is None or _value_lineage(owner) is None or not isinstance(children, list) \
                    or not isinstance(local_grads, list):
                raise wire.WireError("a node of a graph of no Value class")
            children = tuple(self._child(child) for child in children)
            local_grads = tuple(self.unpack(local) for local in local_grads)
            node = owner(value, children, local_grads)
            if getattr(node, "grad", None) != grad:
                node.grad = grad
            if isinstance(data.get("keep"), int) and self.keep_value is not None and not self.copies:
                self.keep_value(data["keep"], node)
        if self.keep_value is _keep_value:
            _synced(node)
        self.made[number] = node
        return node

    def _kept_row(self, row) -> list:
        keys, data, grads = row if isinstance(row, list) and len(row) == 3 else (None, None, None)
        if not (isinstance(keys, list) and isinstance(data, list) and isinstance(grads, list)
                and len(keys) == len(data) == len(grads)):
            raise wire.WireError("a row of kept Values not as rows are sent")
        made = []
        for key, value, grad in zip(keys, data, grads):
            node = self.kept_values.get(key) if type(key) is int else None
            if node is None or type(value) is not float or type(grad) is not float:
                raise wire.WireError("a row of kept Values names one no longer kept")
            if node.data != value:
                node.data = value
            if node.grad != grad:
                node.grad = grad
            made.append(node)
        return made

    def _child(self, reference):
        """A node's child as Packer._child names it."""
        if type(reference) is int:
            found = self.made.get(reference) if reference >= 0 else self.given.get(-1 - reference)
        elif isinstance(reference, dict) and "k" in reference:
            found = self.kept_values.get(reference["k"]) if type(reference["k"]) is int else None
        else:
            found = self.unpack(reference) if isinstance(reference, dict) and GIVEN in reference else None
        if found is None:
            raise wire.WireError(f"no node {str(reference)[:20]} for a child")
        return found

    def _class_of(self, lineage: list):
        """The first class of `lineage` ([module, qualified name], nearest first) that this
        side's package defines, or None."""
        for entry in lineage:
            if not (isinstance(entry, list) and len(entry) == 2):
                return None
            module, qualname = entry
            found = self.modules.get(module) if isinstance(module, str) else None
            owner = _class_in(found, qualname, getattr(found, "__name__", None))
            if owner is not None:
                return owner
        return None

    def _kept_object(self, data):
        """An object rebuilt (_object), and kept where the worker asks (Packer._object), with
        the values numbered within it: named by its key later, it stands for all of them."""
        first = len(self.made)
        made = self._object(data)
        key = data.get("keep")
        if isinstance(key, int) and not self.copies:
            packed = {k: v for k, v in data.items() if k != "keep"}
            self.kept_objects[key] = (packed, made, dict(list(self.made.items())[first:]))
        return made

    def _tensor(self, data):
        import torch

        number = data[TENSOR]
        if "kept" in data:
            tensor = self.kept.get(data["kept"])
            if tensor is None:
                raise wire.WireError("a tensor kept from an earlier call is no longer kept")
        else:
            tensor = data.get("v")
            if not isinstance(tensor, torch.Tensor):
                raise wire.WireError("a packed tensor without its values")
            if data.get("layout") is not None:
                offset, size, stride = data["layout"]
                tensor = tensor.as_strided(size, stride, offset).detach()
            if isinstance(data.get("keep"), int) and self.register is None and not self.copies:
                self.kept[data["keep"]] = tensor
        if self.copies:
            tensor = tensor.detach().clone()
        wanted = bool(data.get("g")) or number in self.grad_of
        if data.get("p"):
            tensor = torch.nn.Parameter(tensor, requires_grad=wanted)
        elif tensor.is_floating_point() or tensor.is_complex():
            tensor = tensor.detach().requires_grad_(wanted) if tensor.requires_grad != wanted else tensor
        self.made[number] = tensor
        grad = self.unpack(data["grad"]) if data.get("grad") is not None else None
        if grad is not None or tensor.is_leaf:
            tensor.grad = grad
        if self.register is not None and isinstance(data.get("keep"), int):
            self.register(data["keep"], tensor)
        return tensor

    def _object(self, data):
        """An object of a class the receiving side has: of the package (in the parts'
        process, the certified modules; in the worker, the student's), or an nn.Module of
        torch's own. What a forged message names is looked up no further: a class defined
        in that very module, a plain name, attributes that are no dunder, registries that
        hold what they hold in torch."""
        import torch

        if OBJECT in data:
            number, lineage, state = data[OBJECT]
            if not isinstance(lineage, list) or not lineage:
                raise wire.WireError("an object without its class")
            owner = module = qualname = None
            for module, qualname in lineage:
                found = self.modules.get(module) if isinstance(module, str) else None
                owner = _class_in(found, qualname, getattr(found, "__name__", None))
                if owner is not None:
                    break
            if owner is None:
                # A class of the code's own, here unknown: an object that holds its state (a
                # part that runs apart reads its tensors and settings only).
                owner = _Kept if isinstance(state, dict) and "modules" not in state else _kept_module()
        else:
            number, module, qualname, state = data[MODULE]
            if not (isinstance(module, str) and module.startswith(_TORCH_MODULES)):
                raise wire.WireError(f"no torch module class in {str(module)[:60]!r}")
            import importlib

            owner = _class_in(importlib.import_module(module), qualname, module)
            if owner is not None and not issubclass(owner, torch.nn.Module):
                owner = None
        if owner is None or not isinstance(state, dict):
            raise wire.WireError(f"no class {str(qualname)[:60]!r} in {str(module)[:60]!r}")
        made = owner.__new__(owner)
        self.made[number] = made
        if isinstance(made, torch.nn.Module):
            torch.nn.Module.__init__(made)
            kinds = {"parameters": torch.Tensor, "buffers": torch.Tensor, "modules": torch.nn.Module}
            for key, kind in kinds.items():
                registry = object.__getattribute__(made, f"_{key}")
                for name, item in _named(state.get(key, {}), registry=True):
                    value = self.unpack(item)
                    if value is not None and not isinstance(value, kind):
                        raise wire.WireError(f"a {key[:-1]} that is a {type(value).__name__}")
                    registry[name] = value
        for name, item in _named(state.get("attributes", {})):
            object.__setattr__(made, name, self.unpack(item))
        return made


class _Kept:
    """Stands for an object of a class the parts' process does not have."""


@functools.cache
def _kept_module() -> type:
    """The stand-in for an nn.Module of a class the parts' process does not have (made at
    first use: torch is imported where parts run, not where this module is)."""
    import torch

    class KeptModule(torch.nn.Module):
        pass

    return KeptModule


def _graph_signature(value):
    """(what a container of chapter 00's Values is now, how many Values it holds, the
    Values) where it holds only Values, numbers, strings, None and containers of them; else
    None. What it is: its kinds, lengths and keys, and each Value's identity, data and grad."""
    signature, values, stack = [], [], [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        row = _row_of_values(item) if kind is list else None
        if row is not None:  # a row of Values: read at once
            signature.append((kind, len(item), tuple(map(id, item)), tuple([getattr(n, "data", None) for n in item]),
                              tuple([getattr(n, "grad", None) for n in item])))
            values.extend(item)
        elif kind is list or kind is tuple:
            signature.append((kind, len(item)))
            stack.extend(reversed(item))
        elif kind is dict:
            signature.append((kind, tuple(item)))
            stack.extend(reversed(list(item.values())))
        elif item is None or kind is float or kind is int or kind is str or kind is bool:
            signature.append(item)
        elif _value_lineage(kind) is not None:
            signature.append((id(item), getattr(item, "data", None), getattr(item, "grad", None)))
            values.append(item)
        else:
            return None
        if len(signature) > 1_000_000:
            return None
    return tuple(signature), len(values), values


def _row_of_values(item: list) -> "type | None":
    """The class of a non-empty list's items where all are Values of that one class whose
    == is identity, else None."""
    first = type(item[0]) if item else None
    if first is None or not _VALUE_LINEAGES.get(first) or first.__eq__ is not object.__eq__:
        return None
    for node in item:
        if type(node) is not first:
            return None
    return first


_VALUE_LINEAGES: dict = {}


def _value_lineage(kind: type) -> "list | None":
    """A class's lineage in the package ([module, qualified name], nearest first) where it
    is (or derives from) chapter 00's Value, else None."""
    if kind is float or kind is int or kind is bool:
        return None
    found = _VALUE_LINEAGES.get(kind, False)
    if found is False:
        lineage = [[_short(base.__module__), base.__qualname__] for base in kind.__mro__
                   if _in_package(getattr(base, "__module__", None))]
        found = lineage if list(VALUE_CLASS) in lineage else None
        _VALUE_LINEAGES[kind] = found
    return found


def _in_package(module) -> bool:
    return isinstance(module, str) and any(module == package or module.startswith(package + ".")
                                           for package in (STUDENT_PACKAGE, CERTIFIED_PACKAGE))


def _short(module: str) -> str:
    return module.split(".", 1)[1] if "." in module else ""


def _class_in(module, qualname, module_name):
    """The class `qualname` defined in `module` itself (nested classes too), or None."""
    if not isinstance(qualname, str) or not module_name:
        return None
    owner = module
    for name in qualname.split("."):
        if not name.isidentifier() or name.startswith("_"):
            return None
        owner = vars(owner).get(name) if isinstance(owner, (type, types.ModuleType)) else None
    return owner if isinstance(owner, type) and owner.__module__ == module_name else None


def _named(items, registry: bool = False) -> list:
    """A state's (name, value) pairs, where every name is an identifier but a dunder (in
    a module's registry, any name without a dot: a ModuleList's are "0", "1", ...)."""
    if not isinstance(items, dict):
        raise wire.WireError("an object's state is a dict by name")
    for name in items:
        fits = isinstance(name, str) and name and "." not in name if registry else \
            isinstance(name, str) and name.isidentifier()
        if not fits or name.startswith("__"):
            raise wire.WireError(f"no attribute may be called {str(name)[:40]!r}")
    return list(items.items())


def _tensors_of(value, into: list, skip: set) -> list:
    """The new tensors of a result, in order (a tensor, or lists, tuples and dicts of them;
    `skip`: ids of tensors the call was given)."""
    import torch

    if isinstance(value, torch.Tensor):
        if id(value) not in skip:
            into.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors_of(item, into, skip)
    elif isinstance(value, dict):
        for item in value.values():
            _tensors_of(item, into, skip)
    return into


# ------------------------------------------------------------- the worker's side

# (channel, send, recv, decode, encode): the worker's line to the grader, bound by
# serve_tasks before any student code runs.
LINE: list = []
# The worker's tensors the parts' process keeps, for the probe running now (Packer.kept),
# and the count that names them; EPOCH tells the parts' process when to forget its own.
KEPT: dict = {}
KEPT_OBJECTS: dict = {}
# Chapter 00's Values the parts' process keeps ({id: (key, value, children, local grads)}),
# and each by its key.
KEPT_VALUES: dict = {}
KEPT_VALUES_BY_KEY: dict = {}
# Containers of Values the parts' process keeps ({id: (key, container, signature, its Values)}).
KEPT_CONTAINERS: dict = {}
# What parts whose answers depend on numbers only answered this probe, by what they were
# asked (_numbers_asked): asked again, they are not called.
ANSWERED: dict = {}
KEPT_KEYS: list = [0]
EPOCH: list = [0]
# torch's random state as the parts' process holds it after the last call of this epoch
# (None: not known there yet): a call whose state is the same sends none.
RNG: list = [None]
# How this side answers a call that comes to it (in the worker: a call back, answered by
# the worker's own code of the task, answer_back; in the parts' process: a part), how it
# words a failure, and the modules an answer's objects are rebuilt on (a function that
# finds them). Bound by serve_tasks or serve before anything else runs.
HERE: list = [None]
DESCRIBE: list = [None]
MODULES_HERE: list = [None]
# The calls this side made and awaits, innermost last (their values by number: what a call
# back names), and the calls it is answering (what each was given, by number).
_CALLS_OUT: list = []
_ANSWERING: list = []


def forget() -> None:
    """Before each probe, and after a part failed (what it kept may have changed there and
    not here): nothing kept on either side."""
    KEPT.clear()
    KEPT_OBJECTS.clear()
    KEPT_VALUES.clear()
    KEPT_VALUES_BY_KEY.clear()
    KEPT_CONTAINERS.clear()
    ANSWERED.clear()
    RNG[0] = None
    EPOCH[0] += 1


def _keep(key: int, tensor) -> None:
    """A tensor of an answer that the parts' process keeps under `key`: named so while it
    stays as it came."""
    KEPT[id(tensor)] = (key, tensor, _stamp(tensor))


def _keep_value(key: int, node) -> None:
    """A Value the parts' process keeps under `key`: named so while it is built of the same
    children and local gradients (its data and grad are sent each time it is sent), with
    its data and grad as the parts' process last had them (_changed_values)."""
    KEPT_VALUES[id(node)] = [key, node, getattr(node, "_children", None), getattr(node, "_local_grads", None),
                             getattr(node, "data", None), getattr(node, "grad", None)]
    KEPT_VALUES_BY_KEY[key] = node


def _synced(node) -> None:
    """`node`'s data and grad are as the parts' process has them now."""
    known = KEPT_VALUES.get(id(node))
    if known is not None and known[1] is node:
        known[4], known[5] = getattr(node, "data", None), getattr(node, "grad", None)


def _changed_values(sent: dict) -> "list | None":
    """The kept Values whose data or grad the worker changed since the parts' process had
    them, but those sent in this call (`sent`: ids): what a part that walks the graph may
    reach below its ghosts (a parameter a step changed). [keys, data, grads], or None."""
    keys, data, grads = [], [], []
    for ident, known in KEPT_VALUES.items():
        if ident in sent:
            continue
        node = known[1]
        now = (getattr(node, "data", None), getattr(node, "grad", None))
        if now != (known[4], known[5]):
            keys.append(known[0])
            data.append(now[0])
            grads.append(now[1])
            known[4], known[5] = now
    return [keys, data, grads] if keys else None


def _stamp(tensor) -> tuple:
    """What says a tensor is as it was sent: its storage, layout, and a checksum of its
    values (its version alone misses a change made through .data, which has its own)."""
    import zlib

    import torch

    values = tensor.detach()
    values = values if values.is_contiguous() else values.contiguous()
    checksum = zlib.crc32(values.reshape(-1).view(torch.uint8).numpy()) if values.numel() else 0
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
            tuple(tensor.stride()), tensor.dtype, tensor.requires_grad, checksum)


def call_part(part: str, arguments: dict, mode: "str | None" = None):
    """A part's call across: from a certified part's stub in the worker, to the parts'
    process; or, in the parts' process, from a certified part that reached a task it does
    not hold, back to the worker, whose own code of that task answers (a call back). Its
    result as the other side computed it, with what it changed applied here."""
    import torch

    from grader.run.inside import op_rules

    # Within an answer (a call back, or a call the worker's code makes while answering
    # one), what that answer was given is named, not sent; nothing is kept (KEPT is the
    # probe's, for calls the worker's own code makes).
    answering = _ANSWERING[-1] if _ANSWERING else None
    outer = {id(value): number for number, value in answering.items()} if answering is not None else None
    keeping = answering is None
    packer = Packer(given=outer, skip_uncrossable=True, kept=KEPT if keeping else None,
                    kept_objects=KEPT_OBJECTS if keeping else None)
    asked = _numbers_asked(part, arguments) if mode == "numbers" and keeping else None
    if asked is not None and asked[0] in ANSWERED:
        return _answered_before(ANSWERED[asked[0]], asked[1])
    packer.kept_values = KEPT_VALUES if keeping else None
    packer.whole_graphs = mode == "graph"
    try:
        packed = packer.pack(arguments)
    except CannotCross as error:
        raise type(error)(f"the course's {part} runs in a process of its own and cannot be given {error}") from None
    given = {n: v for n, v in enumerate(_numbered(packer))}
    given.update({_outer(number): answering[number] for number in packer.named_given})
    rng = torch.get_rng_state()
    known = keeping and RNG[0] is not None and torch.equal(rng, RNG[0])
    RNG[0] = None  # unknown, should the call fail
    changed = _changed_values({id(v) for v in packer.objects}) if mode == "graph" and keeping else None
    reply = _across(PartCall(part=part, arguments=packed, rng=None if known else rng,
                             grad_enabled=torch.is_grad_enabled(),
                             name_failure=op_rules.NAMING_FAILURES[0], epoch=EPOCH[0],
                             mode=mode if mode in ("graph", "numbers") else None, values=changed), given)
    unpacker = Unpacker(MODULES_HERE[0] or _student_modules, given, register=_keep if keeping else None,
                        kept_values=KEPT_VALUES_BY_KEY, keep_value=_keep_value if keeping else None)
    result = unpacker.unpack(reply.result)
    _apply(reply.changes, unpacker, given)
    if keeping and reply.changes:
        _stale(reply.changes, packer, given)
        dropped = {entry[0] for entry in reply.changes.get("dropped", [])}
        for ident in [i for i, known in KEPT_CONTAINERS.items() if known[0] in dropped]:
            del KEPT_CONTAINERS[ident]
    for number, _ in (reply.changes or {}).get("tensors", []):  # changed alike on both sides: still kept
        known = KEPT.get(id(given[number]))
        if known is not None and known[1] is given[number]:
            KEPT[id(given[number])] = (known[0], known[1], _stamp(known[1]))
    if reply.rng is not None:
        torch.set_rng_state(reply.rng)
    if keeping:
        RNG[0] = rng if reply.rng is None else reply.rng
    if asked is not None and not reply.changes and reply.rng is None:
        _remember(asked, reply.result, given)
    wrt = [n for n, tensor in enumerate(_numbered(packer)) if isinstance(tensor, torch.Tensor)
           and tensor.requires_grad and tensor.is_floating_point()]
    outputs = _tensors_of(result, [], {id(v) for v in given.values()} | unpacker.views)
    outputs = [t for t in outputs if t.is_floating_point()]
    if not wrt or not outputs or not torch.is_grad_enabled():
        return result
    # The part's new tensors, joined to the graph: their gradient crosses again.
    crossing = _Crossing(part, packed, rng, wrt, outputs, given)
    joined = _crossing_function().apply(crossing, *(given[n] for n in wrt))
    joined = joined if isinstance(joined, tuple) else (joined,)
    swap = {id(old): new for old, new in zip(outputs, joined)}
    return _swapped(result, swap)


def _numbers_asked(part: str, arguments: dict):
    """What a part whose answer depends on numbers only (Task.numbers_only) is asked: its
    name with the numbers of the Values and the plain values it is given, in their places
    (hashable: the key of ANSWERED), and the Values in the order met; or None where it is
    given anything else."""
    values, places = [], {}

    def asked(value, depth=0):
        kind = type(value)
        if value is None or kind in (bool, int, str):
            return (kind.__name__, value)
        if kind is float:
            return ("float", value, math.copysign(1.0, value))  # (-0.0 is no 0.0 here)
        if depth > 8:
            raise LookupError
        if kind is list or kind is tuple:
            return (kind.__name__, tuple(asked(item, depth + 1) for item in value))
        if kind is dict:
            return ("dict", tuple((asked(k, depth + 1), asked(v, depth + 1)) for k, v in value.items()))
        if _value_lineage(kind) is None:
            raise LookupError
        if id(value) not in places:
            places[id(value)] = len(values)
            values.append(value)
        data = getattr(value, "data", None)
        if type(data) is not float:
            raise LookupError
        return ("Value", places[id(value)], data, math.copysign(1.0, data))

    try:
        return (part, asked(arguments)), values
    except (LookupError, RecursionError):
        return None


def _remember(asked, result, given: dict) -> None:
    """A part's answer to numbers asked, kept for the rest of the probe: with each value it
    names of the call by its place among the Values asked (it must name no other)."""
    places = {id(value): place for place, value in enumerate(asked[1])}
    numbered = {number: places[id(value)] for number, value in given.items() if id(value) in places}
    named = set()
    if _names_only_given(result, named) and named <= set(numbered):
        ANSWERED[asked[0]] = (result, numbered)


def _names_only_given(packed, named: set) -> bool:
    """Whether a packed answer names nothing kept (only values of its own, or given ones,
    collected in `named`)."""
    if isinstance(packed, list):
        return all(_names_only_given(item, named) for item in packed)
    if not isinstance(packed, dict):
        return True
    if VALUE in packed:
        fields = packed[VALUE]
        if len(fields) != 6 or fields[4] is None:  # (kept, or a ghost: their graphs are kept there)
            return False
        for child in fields[4]:
            if type(child) is not int:
                return False
            if child < 0:
                named.add(-1 - child)
        return True
    if GIVEN in packed:
        named.add(packed[GIVEN])
        return True
    if any(tag in packed for tag in (KEPT_OBJECT, KEPT_CONTAINER, TENSOR, VIEW, OBJECT, MODULE, CONTAINER)):
        return False
    return all(_names_only_given(item, named) for item in packed.values())


def _answered_before(remembered, values: list):
    """An answer remembered (_remember) for the Values now asked: made anew here, nothing
    of it kept by the parts' process."""
    result, numbered = remembered
    given = {number: values[place] for number, place in numbered.items()}
    return Unpacker(MODULES_HERE[0] or _student_modules, given, kept_values=KEPT_VALUES_BY_KEY).unpack(result)


def _stale(changes: dict, packer: Packer, given: dict) -> None:
    """The kept objects the part changed, or changed anything within (an attribute, a
    gradient, a tensor's values), are no longer named by key: the parts' process holds
    them as the part left them, and what is compared with is what was sent before. They
    are sent whole next time, and kept anew."""
    changed = sorted({entry[0] for name, kind in changes.items() if name not in ("dropped", "kept_values")
                      for entry in kind if isinstance(entry[0], int)})
    if not changed:
        return
    import bisect

    for number, end in packer.spans.items():
        at = bisect.bisect_left(changed, number)
        if at < len(changed) and changed[at] < end:
            KEPT_OBJECTS.pop(id(given[number]), None)


def _outer(number: "int | str") -> str:
    """How a call back and its answer name a value of the call it calls back from (a name
    of its own: "^3" is that call's value 3, "^^3" its caller's), apart from the call's
    own numbered values."""
    return f"^{number}"


def _numbered(packer: Packer) -> list:
    """The packer's tensors and objects in number order."""
    numbered = [None] * (len(packer.tensors) + len(packer.objects))
    for value in (*packer.tensors, *packer.objects):
        numbered[packer.seen[id(value)]] = value
    return numbered


def _student_modules() -> dict:
    """The package's modules by short name, found again only when a module was imported
    or dropped since (chapter 00 calls across thousands of times a check)."""
    import sys

    seen = (len(sys.modules), STUDENT_PACKAGE)
    if _STUDENT_MODULES[0] != seen:
        prefix = STUDENT_PACKAGE + "."
        _STUDENT_MODULES[:] = [seen, {name[len(prefix):]: module for name, module in list(sys.modules.items())
                                      if name.startswith(prefix) and module is not None}]
    return _STUDENT_MODULES[1]


_STUDENT_MODULES: list = [None, {}]


def _swapped(value, swap: dict):
    if id(value) in swap:
        return swap[id(value)]
    if type(value) is list:
        return [_swapped(item, swap) for item in value]
    if type(value) is tuple:
        return tuple(_swapped(item, swap) for item in value)
    if type(value) is dict:
        return {key: _swapped(item, swap) for key, item in value.items()}
    return value


def _apply(changes, unpacker: Unpacker, given: dict) -> None:
    """What the part changed, done to the worker's own values: tensors changed in place,
    gradients, attributes set or deleted, generators' states."""
    import torch

    if not changes:
        return
    with torch.no_grad():
        for number, value in changes.get("tensors", []):
            target, new = given[number], unpacker.unpack(value)
            if target.shape == new.shape and target.dtype == new.dtype:
                target.copy_(new)
            else:
                target.data = new
    for number, grad in changes.get("grads", []):
        given[number].grad = unpacker.unpack(grad)
    for number, state in changes.get("objects", []):
        target = given[number]
        for name, value in state.get("set", {}).items():
            setattr(target, name, unpacker.unpack(value))
        for name in state.get("deleted", []):
            delattr(target, name)
    for number, state in changes.get("generators", []):
        given[number].set_state(unpacker.unpack(state))
    for number, data, grad in changes.get("values", []):
        given[number].data, given[number].grad = unpacker.unpack(data), unpacker.unpack(grad)
        _synced(given[number])
    keys, data, grads = changes.get("kept_values") or ([], [], [])
    for key, value, grad in zip(keys, data, grads):  # below a ghost: named by key
        node = KEPT_VALUES_BY_KEY.get(key)
        if node is not None:
            node.data, node.grad = unpacker.unpack(value), unpacker.unpack(grad)
            _synced(node)


def _across(call: PartCall, given: dict) -> PartReply:
    """Send `call` and wait for its reply, answering meanwhile each call that comes back
    (a part that reaches code this side holds: HERE). `given`: the call's values by
    number, what a call back names."""
    channel, send, recv, decode, encode = LINE
    try:
        send(channel, encode(call))
    except wire.OverLimits:
        forget()  # what the packing kept, the other side never received
        raise TooLargeToCross(f"the course's {call.part} runs in a process of its own and cannot be given values "
                              f"of {wire.TOO_LARGE}") from None
    _CALLS_OUT.append(given)
    try:
        while True:
            message = decode(recv(channel), PartReply, PartCall)
            if isinstance(message, PartReply):
                reply = message
                break
            _send_answer(channel, send, encode, _answered(message))
    finally:
        _CALLS_OUT.pop()
    if reply.error is not None:
        forget()
        if reply.error.operation is not None and call.name_failure:  # the operator that failed, named here
            from grader.run.inside import op_rules

            operation = reply.error.operation
            op_rules.FAILED_OP[:] = [{"op": operation.op, "tensors": operation.tensors, "dtype": operation.dtype}]
        raise _raised(reply.error)
    return reply


def _send_answer(channel, send, encode, reply: PartReply) -> None:
    """A call's answer sent; one over the wire's limits is the caller's failure, as an
    answer of that size would be anywhere: it is told so, and nothing else is sent."""
    try:
        send(channel, encode(reply))
    except wire.OverLimits:
        failure = TooLargeToCross(f"the answer holds {wire.TOO_LARGE}, more than can cross between processes")
        send(channel, encode(PartReply(error=DESCRIBE[0](failure))))


def _answered(call: PartCall) -> PartReply:
    """A call that came to this side while it waited on its own, answered by HERE (or its
    failure, as DESCRIBE words it)."""
    try:
        return HERE[0](call)
    except BaseException as error:  # noqa: BLE001 - the failure is the caller's to raise
        return PartReply(error=DESCRIBE[0](error))


def _raised(failure) -> BaseException:
    """The part's failure, raised again in the worker as the class it was where Python or
    torch names it (a ValueError the part raises on a bad id), else as a RuntimeError."""
    import builtins

    import torch

    from grader.run.inside.messages import Cause

    if failure.cause is Cause.TOO_LARGE_TO_CROSS:  # an answer too large to come back
        return TooLargeToCross(failure.message)
    kind = getattr(builtins, failure.type, None) or getattr(torch, failure.type, None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    try:
        return kind(failure.message)
    except Exception:  # noqa: BLE001 - a class that wants other arguments
        return RuntimeError(failure.message)


class _Crossing:
    """One call across that autograd may ask the gradient of: its packed arguments and
    random state are kept, to run the part again with the gradients of its new tensors."""

    def __init__(self, part: str, packed, rng, wrt: list[int], outputs: list, given: dict):
        self.part, self.packed, self.rng, self.wrt, self.outputs = part, packed, rng, wrt, outputs
        self.given = given  # the call's values by number, as a call back names them
        self.epoch = EPOCH[0]  # what the packed arguments name as kept is kept in this one

    def backward(self, grads: tuple) -> list:
        packer = Packer()
        grad_outputs = [None if g is None else packer.pack(g) for g in grads]
        reply = _across(PartCall(part=self.part, arguments=self.packed, rng=self.rng, wrt=list(self.wrt),
                                 grad_outputs=grad_outputs, epoch=self.epoch), self.given)
        return list(Unpacker({}).unpack(reply.result))


@functools.cache
def _crossing_function() -> type:
    """The autograd Function of a call across (made at first use, as _kept_module)."""
    import torch

    class CrossingFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, crossing, *inputs):
            ctx.crossing = crossing
            return tuple(output.detach() for output in crossing.outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            return (None, *ctx.crossing.backward(grads))

    return CrossingFunction


# ----------------------------------------------------- the parts' process's side


def serve(channel, send, recv, request: PartsRequest, decode, encode, describe, load) -> None:
    """Serve calls across until the grader closes the channel: load the certified modules
    (`load`: tasks.load), then answer each PartCall with the part's result and changes (or
    gradients), or its failure (`describe`: tasks.describe). A part that reaches a task
    the worker's code answers calls it back (call_part, on this same line)."""
    from grader.run.inside.messages import Ready

    compiled, request.certified = request.certified, None
    modules = load(CERTIFIED_PACKAGE, compiled, "certified",
                   sorted(k[:-3] for k in compiled if k.endswith(".py") and "/" not in k and k != "__init__.py"), {})
    compiled.clear()
    where = {region.task: region.module for region in request.regions}
    LINE[:] = [channel, send, recv, decode, encode]
    HERE[0], DESCRIBE[0], MODULES_HERE[0] = (lambda call: answer(call, modules, where)), describe, modules
    send(channel, encode(Ready()))
    while True:
        try:
            call = decode(recv(channel), PartCall)
        except (EOFError, OSError, wire.WireError):
            return
        _send_answer(channel, send, encode, _answered(call))


# On the side that answers calls: the tensors kept for the caller's probe running now, by
# key, the objects, and that probe's epoch (a call of another epoch finds none kept).
_KEPT: dict = {}
_KEPT_OBJECTS: dict = {}
_KEPT_EPOCH: list = [None]
_PARTS_KEYS: list = [0]
# Chapter 00's Values kept, by key, and each one's key by its id.
_KEPT_VALUES: dict = {}
_VALUE_KEYS: dict = {}
_KEPT_CONTAINERS: dict = {}
_SENT_VALUES: set = set()  # the keys of the Values made here that the worker has too


def _keep_part_value(key: int, node) -> None:
    _KEPT_VALUES[key] = node
    _VALUE_KEYS[id(node)] = key


def answer(call: PartCall, modules: dict, where: dict) -> PartReply:
    """One call across, in the parts' process: the part's region run on the values given."""
    function = vars(modules[where[call.part]]).get(REGION_FUNCTION + call.part) if call.part in where else None
    if not callable(function):
        raise wire.WireError(f"no part {call.part[:40]!r} runs apart here")
    return _run(call, lambda arguments: function(**arguments), modules, keep=True)


# In the worker: each task's module and qualified name (TaskRequest.regions), for a call back.
REGIONS: dict = {}


def answer_back(call: PartCall) -> PartReply:
    """A call back, in the worker: the worker's own code of the task (the student's: the
    worker holds no part of it) run on the values given, under the probe's rules like any
    of its code. A method is called on the object given as self, as the part that called
    it back would have (a subclass's own method, if it has one); its arguments go by
    position, as the course's signature orders them."""
    place = REGIONS.get(call.part)
    if place is None:
        raise wire.WireError(f"no task {call.part[:40]!r} to call back")
    module_name, qualname = place
    owner, _, name = qualname.rpartition(".")

    def run(arguments: dict):
        values = list(arguments.values())
        if owner:
            return getattr(values[0], name)(*values[1:])
        return getattr(_student_modules()[module_name], name)(*values)

    return _run(call, run, _student_modules, keep=False)


def _run(call: PartCall, run, modules, keep: bool) -> PartReply:
    """A call answered: its values rebuilt (on `modules`' classes), `run` on them, and the
    result, with what the run changed of them and of torch's random state; or, for a
    gradient, the gradients asked for. `keep`: the answer's new tensors are kept for the
    caller to name later (only the parts' process keeps: a call back's answer is by value)."""
    import torch

    if call.epoch != _KEPT_EPOCH[0]:
        if call.rng is None:
            raise wire.WireError("the first call of a probe comes with torch's random state")
        _KEPT.clear()
        _KEPT_OBJECTS.clear()
        _KEPT_VALUES.clear()
        _VALUE_KEYS.clear()
        _KEPT_CONTAINERS.clear()
        _SENT_VALUES.clear()
        _KEPT_EPOCH[0] = call.epoch
    held = torch.get_rng_state()  # (None in a call: the state the last call left here)
    if call.rng is not None:
        torch.set_rng_state(call.rng)
    if call.values is not None:
        _set_values(call.values)
    unpacker = _unpacker(modules, call, keep=keep)
    arguments = unpacker.unpack(call.arguments)
    if not isinstance(arguments, dict):
        raise wire.WireError("a part's arguments go by name")
    _ANSWERING.append(unpacker.made)
    try:
        if call.wrt:
            try:
                return PartReply(result=_gradients(run, arguments, call, unpacker))
            finally:  # the caller's state is where its last forward call left it, not where this run did
                torch.set_rng_state(held)
        before, rng = _snapshot(unpacker.made), torch.get_rng_state()
        containers = [(key, made, _Held(made)) for key, made in unpacker.containers]
        below = _below(unpacker.made) if call.mode == "graph" and keep else {}
        try:
            with torch.set_grad_enabled(call.grad_enabled):
                result = run(arguments)
        except Exception:
            if call.name_failure:  # the operator that failed, named by the part run again on copies
                _failing_operator(run, call, modules)
            raise
    finally:
        _ANSWERING.pop()
    given = {id(value): number for number, value in unpacker.made.items()}
    storages = {value.untyped_storage().data_ptr(): number for number, value in unpacker.made.items()
                if isinstance(value, torch.Tensor) and value.numel()}
    packer = Packer(given=given, views=storages, keeps=_KEPT if keep else None)
    packer.value_keys = _VALUE_KEYS if keep else None
    packer.ghosts = keep and call.mode != "numbers"  # (a small graph, sent whole to be remembered)
    after = torch.get_rng_state()
    packed = packer.pack(result)  # (first: what the changes name of it was numbered here)
    changes = _changes(before, unpacker.made, packer)
    # A kept container the part changed (a cache appended to) is kept no longer: the
    # worker's, changed alike by what the answer sets, is sent whole next time.
    changed_below = [(key, node) for key, (node, was) in below.items()
                     if (getattr(node, "data", None), getattr(node, "grad", None)) != was]
    if changed_below:
        changes["kept_values"] = [[key for key, _ in changed_below],
                                  [packer.pack(node.data) for _, node in changed_below],
                                  [packer.pack(node.grad) for _, node in changed_below]]
    dropped = [key for key, made, held in containers if not held.same(_Held(made))]
    for key in dropped:
        _KEPT_CONTAINERS.pop(key, None)
    if dropped:
        changes["dropped"] = [[key] for key in dropped]
    return PartReply(result=packed, changes=changes, rng=None if torch.equal(after, rng) else after)


def _set_values(values) -> None:
    """The data and grads the worker changed of Values kept here (_changed_values)."""
    keys, data, grads = values if isinstance(values, list) and len(values) == 3 else (None, None, None)
    if not (isinstance(keys, list) and isinstance(data, list) and isinstance(grads, list)):
        raise wire.WireError("changed Values not as they are sent")
    for key, value, grad in zip(keys, data, grads):
        node = _KEPT_VALUES.get(key) if type(key) is int else None
        if node is None or type(value) not in (float, int) or type(grad) not in (float, int):
            raise wire.WireError("a changed Value no longer kept")
        node.data, node.grad = float(value), float(grad)


def _below(made: dict) -> dict:
    """The Values below those a call was given that the worker has too (by key: made there,
    or sent there) but was not sent now, with their data and grads: what a part that walks
    the graph changes of them is reported by key."""
    given = {id(value) for value in made.values()}
    stack = [value for value in made.values() if _value_lineage(type(value)) is not None]
    met, found = set(given), {}
    while stack:
        node = stack.pop()
        for child in getattr(node, "_children", ()):
            if id(child) in met or _value_lineage(type(child)) is None:
                continue
            met.add(id(child))
            stack.append(child)
            key = _VALUE_KEYS.get(id(child))
            if key is not None and (key > 0 or key in _SENT_VALUES):
                found[key] = (child, (child.data, child.grad))
    return found


def _unpacker(modules, call: PartCall, copies: bool = False, keep: bool = False) -> Unpacker:
    """The unpacker of a call's values: what it names of the call this side awaits (a call
    back names what its caller's call gave it) comes from there. `keep`: this side keeps
    the Values the caller asks it to (the parts' process)."""
    unpacker = Unpacker(modules, _CALLS_OUT[-1] if _CALLS_OUT else None, grad_of=call.wrt, kept=_KEPT,
                        kept_objects=_KEPT_OBJECTS, copies=copies, kept_values=_KEPT_VALUES,
                        keep_value=_keep_part_value if keep and not copies else None)
    unpacker.outer = bool(_CALLS_OUT)
    return unpacker


def _failing_operator(run, call: PartCall, modules) -> None:
    """Run the part again on copies of what it was given, with the operator recorder on: the
    operator that raises is noted (op_rules.FAILED_OP) for the failure's description."""
    import torch

    from grader.run.inside import op_rules

    op_rules.FAILED_OP.clear()
    if call.rng is not None:
        torch.set_rng_state(call.rng)
    try:
        arguments = _unpacker(modules, call, copies=True).unpack(call.arguments)
        with torch.set_grad_enabled(call.grad_enabled), op_rules.FailureRecorder():
            run(arguments)
    except Exception:  # noqa: BLE001 - the same failure, expected: only its operator is wanted
        pass


def _gradients(run, arguments: dict, call: PartCall, unpacker: Unpacker) -> list:
    """The gradients of the given tensors numbered `call.wrt`, by the part run again with
    the gradients of its new tensors (None where an input has none)."""
    import torch

    inputs = [unpacker.made[n] for n in call.wrt]
    with torch.enable_grad():
        result = run(arguments)
    outputs = [t for t in _tensors_of(result, [], {id(v) for v in unpacker.made.values()}) if t.is_floating_point()]
    grads = Unpacker({}).unpack(call.grad_outputs) if call.grad_outputs is not None else []
    pairs = [(out, grad) for out, grad in zip(outputs, grads) if grad is not None and out.requires_grad]
    if not pairs:
        return [None] * len(inputs)
    computed = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True)
    return Packer().pack(list(computed))


def _snapshot(made: dict) -> dict:
    """What a call may change of the values it was given, as it stood before: each tensor's
    version and gradient, each object's attributes by identity, each generator's state."""
    import torch

    before = {}
    for number, value in made.items():
        if isinstance(value, torch.Tensor):
            grad = value.grad if value.is_leaf else None
            before[number] = (value._version, id(grad), None if grad is None else grad._version)
        elif isinstance(value, torch.Generator):
            before[number] = value.get_state()
        elif _value_lineage(type(value)) is not None:
            before[number] = (getattr(value, "data", None), getattr(value, "grad", None))
        else:
            before[number] = _attributes(value)
    return before


def _attributes(value) -> dict:
    import torch

    attributes = dict(object.__getattribute__(value, "__dict__"))
    if isinstance(value, torch.nn.Module):
        for key in ("_parameters", "_buffers", "_modules"):
            attributes.update(attributes.pop(key, {}) or {})
        attributes = {k: v for k, v in attributes.items() if not k.startswith("_")}
    return {name: (id(item), item, _contents(item)) for name, item in attributes.items()}


class _Held:
    """What a container held when a call began: its kind, and its items themselves (held,
    so no id is reused meanwhile), containers within as _Held too."""

    __slots__ = ("kind", "keys", "items", "row")

    def __init__(self, item, depth: int = 0):
        self.kind = type(item) if depth < 8 else None  # deeper: never the same (sent again)
        self.keys = list(item) if type(item) is dict else None
        # A row of Values whose == is identity: copied and compared at once.
        self.row = type(item) is list and _row_of_values(item) is not None
        values = item.values() if type(item) is dict else item
        self.items = item[:] if self.row else [_Held(x, depth + 1) if type(x) in (list, tuple, dict) else x
                                               for x in values]

    def same(self, other) -> bool:
        """Whether `other` holds the very same items (by identity, never by ==)."""
        if not (isinstance(other, _Held) and self.kind is not None and self.kind is other.kind
                and self.keys == other.keys and len(self.items) == len(other.items) and self.row == other.row):
            return False
        if self.row:
            return self.items == other.items
        return all(a.same(b) if isinstance(a, _Held) else a is b for a, b in zip(self.items, other.items))


def _contents(item):
    """What a container holds (_Held), or None for anything else."""
    return _Held(item) if type(item) in (list, tuple, dict) else None


def _changes(before: dict, made: dict, packer: Packer) -> dict:
    """What the call changed of the values it was given (_snapshot's), packed."""
    import torch

    changes: dict = {"tensors": [], "grads": [], "objects": [], "generators": [], "values": []}
    for number, value in made.items():
        was = before.get(number)
        if isinstance(value, torch.Tensor):
            grad = value.grad if value.is_leaf else None
            if value._version != was[0]:  # its new values (a copy: not a view of what was given, nor kept)
                packer.keeping = False
                changes["tensors"].append([number, packer.pack(value.detach().clone())])
                packer.keeping = True
            if id(grad) != was[1] or (grad is not None and grad._version != was[2]):
                changes["grads"].append([number, None if grad is None else packer.pack(grad)])
        elif _value_lineage(type(value)) is not None:
            now = (getattr(value, "data", None), getattr(value, "grad", None))
            if now != was:
                changes["values"].append([number, packer.pack(now[0]), packer.pack(now[1])])
        elif isinstance(value, torch.Generator):
            state = value.get_state()
            if not torch.equal(state, was):
                packer.keeping = False
                changes["generators"].append([number, packer.pack(state)])
                packer.keeping = True
        else:
            now = _attributes(value)
            # Set anew, or a container whose contents changed where it stands.
            changed = {name: item for name, (ident, item, contents) in now.items()
                       if name not in was or was[name][0] != ident
                       or (contents is not None and not contents.same(was[name][2]))}
            deleted = sorted(set(was) - set(now))
            if changed or deleted:
                changes["objects"].append([number, {"set": {name: packer.pack(item) for name, item in changed.items()},
                                                    "deleted": deleted}])
    return {key: value for key, value in changes.items() if value}
