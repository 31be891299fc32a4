"""``%%respond`` and ``%respond``: a model at the notebook's fingertips.

``%load_ext jupyter_superfluid`` registers them. The cell body is the input, with
``{name}`` (or ``{x.attr}``, ``{d[key]}``) filled from the notebook's variables and
``{{``/``}}`` for literal braces. By default each cell continues the notebook's current
conversation; ``--new`` starts one, ``--from`` branches from any stored response. The
line magic shows the defaults and the conversation, or sets defaults for later cells.
Errors are one readable line (``UsageError``), not a traceback from the HTTP stack.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from jupyter_superfluid.notebook import model_commands
from jupyter_superfluid.notebook.client import ServerNotFound, find_server
from jupyter_superfluid.notebook.readable import readable
from jupyter_superfluid.notebook.render import choose_renderer
from jupyter_superfluid.notebook.respond import CellRequest, NotebookSession, Schema, Settings
from jupyter_superfluid.notebook.result import Reply, response_id_of
from jupyter_superfluid.notebook.tools import Tool, function_tool
from jupyter_superfluid.notebook.tree_command import show_tree, use_widgets

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
CELL_ONLY = ("schema", "tools", "tool_choice", "out")


# IPython shows exactly UsageError (not subclasses) as one line without a traceback.
RespondError = UsageError


@magics_class
class RespondMagics(Magics):
    """The ``respond`` line and cell magic."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.session = NotebookSession()

    @property
    def ns(self) -> dict[str, Any]:
        """The notebook's variables."""
        assert self.shell is not None
        return self.shell.user_ns  # type: ignore[no-any-return]

    @magic_arguments()
    @argument(
        "command",
        nargs="?",
        help="line magic only: `tree` (the conversation tree), `models` (the served models), "
        "`pull SPEC`, `load ID`, `unload ID`, `rm ID`",
    )
    @argument("target", nargs="?", help="line magic only: the model of pull/load/unload/rm")
    @argument("--load", action="store_true", default=None, help="pull: also load the model")
    @argument(
        "--delete-files",
        action="store_true",
        default=None,
        help="rm: also delete the model's downloaded files",
    )
    @argument(
        "-m", "--model", help="model id (default: the conversation's, else the server's first)"
    )
    @argument("--new", action="store_true", default=None, help="start a new conversation")
    @argument(
        "--from",
        dest="from_",
        metavar="ID_OR_VAR",
        help="branch from a stored response: a resp_… id, or a variable holding one or a response",
    )
    @argument("-i", "--instructions", help="system instructions for this request")
    @argument(
        "--schema", metavar="VAR", help="structured output: a pydantic model or JSON schema dict"
    )
    @argument("--tools", metavar="F,G", help="functions of the notebook the model may call")
    @argument(
        "--tool-choice",
        metavar="CHOICE",
        help="first round: auto (default), required, none, or a tool's name",
    )
    @argument("--max-rounds", type=int, help="most requests in one cell's tool loop (default 4)")
    @argument(
        "--reasoning",
        choices=EFFORTS,
        metavar="EFFORT",
        help="reasoning effort: " + ", ".join(EFFORTS),
    )
    @argument("--max-tokens", type=int, help="most output tokens")
    @argument("--temperature", type=float, help="sampling temperature")
    @argument("--seed", type=int, help="sampling seed (repeatable output)")
    @argument("-o", "--out", metavar="VAR", help="also store the result in this variable")
    @argument("--no-stream", action="store_true", default=None, help="wait for the whole response")
    @argument("--lmsp", action="store_true", default=None, help="go through /lmsp/v1/responses")
    @argument("--reset", action="store_true", default=None, help="line magic: forget the defaults")
    @line_cell_magic
    def respond(self, line: str, cell: str | None = None) -> Any:
        """Ask the model: the cell body is the input; ``%respond`` shows or sets defaults.

        In the body, ``{name}`` (also ``{x.attr}``, ``{d[key]}``, ``{x:.2f}``) is filled
        from the notebook's variables; ``{{`` and ``}}`` are literal braces. Each cell
        continues the notebook's conversation unless ``--new`` or ``--from`` says
        otherwise. The cell's value is the reply (text, tool calls, usage), or with
        ``--schema`` the parsed object. The line magic shows the defaults and the
        conversation, sets defaults for later cells, and with ``--new``/``--from`` moves
        the conversation.
        """
        try:
            # shlex, not IPython's arg_split, so that quotes are removed as in a shell.
            argv = shlex.split(line)
        except ValueError as exc:
            raise RespondError(f"cannot read the options: {exc}") from None
        args = self.respond.parser.parse_args(argv)
        if cell is None:
            return self._line(args)
        if args.command or args.target or args.load or args.delete_files:
            raise RespondError(
                "%%respond takes no positional arguments: the cell body is the input"
            )
        return self._cell(args, cell)

    # --- line magic -----------------------------------------------------------------

    def _line(self, args: Any) -> Any:
        """Show, or set, the defaults and the conversation."""
        if args.command == "tree":
            show_tree(self.session)
            return
        if args.command in model_commands.COMMANDS:
            self._models(args)  # it displays what it shows: nothing to return
            return None
        if args.command:
            known = ", ".join(("tree", *model_commands.COMMANDS))
            raise RespondError(f"unknown %respond command {args.command!r} (known: {known})")
        for name in CELL_ONLY:
            if getattr(args, name) is not None:
                raise RespondError(f"--{name.replace('_', '-')} applies to a %%respond cell only")
        session = self.session
        if args.reset:
            session.defaults = Settings()
        session.defaults = _settings(args).over(session.defaults)
        if args.new:
            session.head = None
        elif args.from_:
            session.head = self._response_id(args.from_)
        print(self.status())

    def _models(self, args: Any) -> Any:
        """``%respond models|pull|load|unload|rm``."""
        from jupyter_superfluid.notebook.models import ModelsError

        try:
            return model_commands.run(args.command, args.target, args, self.session, self.shell)
        except (ModelsError, ServerNotFound) as exc:
            raise RespondError(str(exc)) from None
        except Exception as exc:
            message = readable(exc)
            if message is None:
                raise
            raise RespondError(message) from None

    def status(self) -> str:
        """The defaults, the server and the conversation, for people."""
        session = self.session
        given = session.defaults.given()
        shown = ", ".join(f"{k}={v!r}" for k, v in given.items()) or "none set"
        try:
            ep = find_server()
            server = f"{ep.base_url} ({ep.source})"
        except ServerNotFound as exc:
            server = f"not found: {exc}"
        if session.head is None:
            conversation = "new (the next cell starts one)"
        elif session.last is not None and session.last.id == session.head:
            conversation = f"continues {session.head} ({session.last.data.get('model')})"
        else:
            conversation = f"branches from {session.head}"
        return f"defaults: {shown}\nserver: {server}\nconversation: {conversation}"

    # --- cell magic -----------------------------------------------------------------

    def _cell(self, args: Any, cell: str) -> Any:
        """Run one cell and return its value (the reply, or the parsed schema object)."""
        session = self.session
        if args.new and args.from_:
            raise RespondError("--new and --from exclude each other: pick one")
        req = CellRequest(
            input=self._interpolate(cell),
            settings=_settings(args).over(session.defaults),
            previous_response_id=None if args.new else session.head,
            schema=self._schema(args.schema) if args.schema else None,
            tools=self._tools(args.tools) if args.tools else [],
            tool_choice=_tool_choice(args.tool_choice),
        )
        if args.from_:
            req.previous_response_id = self._response_id(args.from_)
        renderer = choose_renderer(self.shell)
        try:
            reply = session.run(req, renderer)
            value = req.schema.parse(reply) if req.schema else reply
        except KeyboardInterrupt:
            renderer.finish(None, "interrupted: the generation was cancelled")
            raise
        except Exception as exc:
            message = readable(exc)
            if message is None:
                raise
            renderer.finish(None, message)
            raise RespondError(message) from None
        renderer.finish(reply)
        if args.out:
            self.ns[args.out] = value
        if value is reply and getattr(renderer, "shows_value", False) and self.shell:
            self.shell.displayhook.update_user_ns(value)  # `_`, Out: the widget shows it
            return None
        return value

    def _interpolate(self, cell: str) -> str:
        """The cell body with ``{expr}`` fields filled from the user namespace."""
        if not cell.strip():
            raise RespondError("the cell is empty: its body is the input")
        # The body IPython hands over ends with a newline the user did not mean as input.
        body = cell.rstrip().lstrip("\r\n")
        try:
            return string.Formatter().vformat(body, (), _Namespace(self.ns))
        except KeyError as exc:
            raise RespondError(
                f"{{{exc.args[0]}}} in the cell: no such variable (write {{{{ and }}}} for braces)"
            ) from None
        except (AttributeError, IndexError, ValueError, TypeError) as exc:
            raise RespondError(
                f"cannot fill the cell's {{…}} fields: {exc} (write {{{{ and }}}} for braces)"
            ) from None

    def _lookup(self, name: str, what: str) -> Any:
        """A variable of the notebook, or a readable error."""
        try:
            return self.ns[name]
        except KeyError:
            raise RespondError(f"{what} {name!r}: no such variable in the notebook") from None

    def _response_id(self, value: str) -> str:
        """A response id from ``--from``: a variable (id, Reply, Response) or a literal id."""
        held = self.ns[value] if value.isidentifier() and value in self.ns else value
        found = response_id_of(held)
        if not found:
            raise RespondError(f"--from {value}: holds no response id")
        return found

    def _schema(self, name: str) -> Schema:
        """``--schema VAR``: a pydantic model class or a JSON schema dict."""
        value = self._lookup(name, "--schema")
        json_schema = getattr(value, "model_json_schema", None)
        if isinstance(value, type) and callable(json_schema):
            return Schema(value.__name__, json_schema(), model=value)
        if isinstance(value, Mapping):
            spec = dict(value)
            if spec.get("type") == "json_schema" and isinstance(spec.get("schema"), Mapping):
                return _checked(Schema(str(spec.get("name", name)), dict(spec["schema"])))
            return _checked(Schema(str(spec.get("title", name)), spec))
        raise RespondError(
            f"--schema {name}: expected a pydantic model class or a JSON schema dict, "
            f"got {type(value).__name__}"
        )

    def _tools(self, names: str) -> list[Tool]:
        """``--tools f,g``: the notebook's functions as tools."""
        tools = []
        for name in (n.strip() for n in names.split(",")):
            if not name:
                continue
            fn = self._lookup(name, "--tools")
            if not callable(fn):
                raise RespondError(f"--tools {name}: not a function ({type(fn).__name__})")
            try:
                tools.append(function_tool(fn, name))
            except Exception as exc:
                raise RespondError(f"--tools {name}: cannot describe it as a tool: {exc}") from None
        return tools


class _Namespace(dict):  # type: ignore[type-arg]
    """The user namespace as ``str.format`` sees it (a lookup, not a copy)."""

    def __init__(self, ns: Mapping[str, Any]) -> None:
        super().__init__()
        self.ns = ns

    def __getitem__(self, key: str) -> Any:
        return self.ns[key]

    def __contains__(self, key: object) -> bool:
        return key in self.ns


def _checked(schema: Schema) -> Schema:
    """A dict schema that is a valid JSON schema (checked here: clearer than a server error)."""
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema.json_schema).check_schema(schema.json_schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "top level"
        raise RespondError(
            f"--schema {schema.name}: not a valid JSON schema at {where}: {exc.message}"
        ) from None
    return schema


def _settings(args: Any) -> Settings:
    """The settings given on a magic's line."""
    for name in ("max_rounds", "max_tokens"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise RespondError(f"--{name.replace('_', '-')} must be at least 1")
    return Settings(
        model=args.model,
        instructions=args.instructions,
        reasoning=args.reasoning,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        max_rounds=args.max_rounds,
        no_stream=args.no_stream,
        lmsp=args.lmsp,
    )


def _tool_choice(value: str | None) -> str | dict[str, Any]:
    """``--tool-choice``: a mode, or a tool's name (forcing that tool)."""
    if value is None or value in ("auto", "required", "none"):
        return value or "auto"
    return {"type": "function", "name": value}


def register(ipython: Any) -> RespondMagics:
    """Register the magics on a shell (``%load_ext jupyter_superfluid``)."""
    magics = RespondMagics(ipython)
    ipython.register_magics(magics)
    use_widgets()
    return magics


def last_reply(ipython: Any) -> Reply | None:
    """The last reply ``%%respond`` produced in this shell (also for schema cells)."""
    magics = ipython.magics_manager.registry.get("RespondMagics")
    return magics.session.last if magics is not None else None
