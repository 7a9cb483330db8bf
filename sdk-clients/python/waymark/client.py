"""The client: start workflows and watch them (`waymark.v1.WorkflowService`). `Client` takes its
messaging methods from `messaging`, cancel, resume and delete from `lifecycle`, re-pinning and
bulk operations from `bulk`, `update_workflow` from `updates`."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import _rpc
from ._backoff import DEFAULT_PATIENCE
from ._connection import Pem, resolve
from ._pages import read_all
from ._payload import to_payload
from ._proto import types_pb2, workflow_pb2, workflow_pb2_grpc
from ._rpc import call
from ._time import Seconds, seconds, to_duration, to_timestamp
from .bulk import BulkCalls
from .errors import WorkflowFailed
from .lifecycle import LifecycleCalls
from .messaging import MessagingCalls
from .queues import Queues
from .schedules import Schedules
from .types import Step, StreamEntry, Workflow, WorkflowStatus
from .updates import UpdateCalls


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list, newest first; `next_page_token` is None on the last page. A page may
    hold fewer than `page_size` workflows (their payloads filled the response) and still not be
    the last: only a None `next_page_token` ends the list."""

    workflows: builtins.list[Workflow]
    next_page_token: str | None


@dataclass(frozen=True, slots=True)
class StartedAndSent:
    """What `Client.start_and_send` did: `handle` is the workflow that got the message
    (`handle.created` is True when this call started it); `duplicate` is True when an earlier
    call with the same idempotency key had delivered it, and nothing new was sent —
    `message_id` is then that earlier message's."""

    handle: WorkflowHandle
    message_id: str
    duplicate: bool


class Client(MessagingCalls, LifecycleCalls, BulkCalls, UpdateCalls):
    """Connects to a Waymark server (`host:port` or a URL; `WAYMARK_SERVER`, else
    127.0.0.1:7450). Use it as `async with Client() as client:` or call `close()`.

    `https://` connects with TLS, as does an address without a scheme when a TLS option is
    set: `tls_ca` is the CA to trust (a PEM file's path, or PEM bytes; the system's roots when
    not given), `tls_cert` and `tls_key` a client certificate for mutual TLS. `api_key` is sent
    as `authorization: Bearer <key>` and `namespace` as `waymark-namespace` on every call.
    Each option left at None comes from its environment variable: `WAYMARK_TLS_CA`,
    `WAYMARK_TLS_CERT`, `WAYMARK_TLS_KEY`, `WAYMARK_API_KEY`, `WAYMARK_NAMESPACE`. An `http://`
    address with a TLS option raises `ValueError`, and so does an API key with a plaintext
    address (`http://`, or no scheme and no TLS option) whose host is not loopback (`localhost`,
    `127.x.x.x`, `::1`): the key would cross the network unencrypted. Use `https://`, or, to
    send it anyway, `insecure=True` (or `WAYMARK_INSECURE=1`). A call the server refuses for the key raises
    `RpcError` with reason UNAUTHENTICATED (no key, or one unknown, revoked or expired) or
    PERMISSION_DENIED (the key's role does not allow the call).

    Calls that are safe to make twice — reads, waits, starts and forks (always with a workflow
    id: one is made here when not given), cancel, resume, `set_version`, bulk batches, updates
    (always with an update id: one is made here when not given), and sends and start-and-sends
    with an idempotency key — are made again, with backoff, while the
    server answers UNAVAILABLE (unreachable, or its database restarting), for up to
    `retry_unavailable_for` seconds; then `UnavailableError` (or
    `RpcError` with code UNAVAILABLE) is raised. Other calls raise it at once."""

    def __init__(
        self,
        server: str | None = None,
        *,
        tls_ca: Pem | None = None,
        tls_cert: Pem | None = None,
        tls_key: Pem | None = None,
        api_key: str | None = None,
        namespace: str | None = None,
        insecure: bool = False,
        retry_unavailable_for: Seconds = DEFAULT_PATIENCE,
    ) -> None:
        self._connection = resolve(
            server,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            api_key=api_key,
            namespace=namespace,
            insecure=insecure,
        )
        self._channel = _rpc.channel(self._connection)
        self._rpc = workflow_pb2_grpc.WorkflowServiceStub(self._channel)
        # How long calls that are safe to repeat are retried while the server is unavailable.
        self._patience = seconds(retry_unavailable_for)
        self.queues = Queues(self._channel, self._patience)
        self.schedules = Schedules(self._channel, self._patience)

    def __repr__(self) -> str:
        return f"Client({self._connection!r})"

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def start(
        self,
        workflow_name: str,
        input: Any = None,
        *,
        workflow_id: str | None = None,
        queue: str | None = None,
        app_version: str | None = None,
        timeout: Seconds | None = None,
        priority: int = 0,
        partition_key: str | None = None,
        dedup_id: str | None = None,
        return_existing: bool = False,
        delay: Seconds | None = None,
        debounce_key: str | None = None,
        debounce_max_delay: Seconds | None = None,
        allow_unregistered: bool = False,
        tags: Mapping[str, str] | None = None,
    ) -> WorkflowHandle:
        """Starts a workflow. Starting a `workflow_id` again returns the existing workflow
        (`handle.created` is False). `timeout` cancels it (and its children) if it has not
        finished in time; `dedup_id` is unique among the queue's unfinished workflows
        (`RpcError` reason DEDUP_ID_TAKEN, unless `return_existing`); `delay` holds the start
        back; `debounce_key` collapses repeated starts onto one delayed workflow.

        A name no worker has registered is refused (`RpcError` reason WORKFLOW_NAME_UNKNOWN)
        unless `allow_unregistered`: then the workflow is enqueued and waits until a worker
        that registers the name connects (during a rolling deploy, say), and
        `handle.name_registered` is False — as it stays for a misspelt name, which waits for
        ever.

        `tags` label it to find it by (`list(tags=...)`, `WorkflowFilter.tags`): at most 16,
        keys 1-64 characters of letters, digits and `_ - . /`, values at most 256 characters
        (`RpcError` reason INVALID_ARGUMENT otherwise). Children it starts inherit them.

        Without a `workflow_id`, one is made here (a UUID), so that a start retried because the
        server was unavailable cannot start a second workflow; a retried start whose first
        attempt did start it returns it with `created` False."""
        req = _start_request(
            workflow_name,
            input,
            workflow_id=workflow_id,
            queue=queue,
            app_version=app_version,
            timeout=timeout,
            priority=priority,
            partition_key=partition_key,
            dedup_id=dedup_id,
            return_existing=return_existing,
            delay=delay,
            debounce_key=debounce_key,
            debounce_max_delay=debounce_max_delay,
            allow_unregistered=allow_unregistered,
            tags=tags,
        )
        r = await call(self._rpc.StartWorkflow, req, retry_for=self._patience)
        wf = Workflow.from_proto(r.workflow)
        return WorkflowHandle(
            self,
            wf.workflow_id,
            workflow=wf,
            created=r.created,
            name_registered=r.name_registered,
        )

    async def start_and_send(
        self,
        workflow_name: str,
        input: Any = None,
        *,
        message: Any,
        topic: str = "",
        idempotency_key: str | None = None,
        workflow_id: str | None = None,
        queue: str | None = None,
        app_version: str | None = None,
        timeout: Seconds | None = None,
        priority: int = 0,
        partition_key: str | None = None,
        dedup_id: str | None = None,
        return_existing: bool = False,
        delay: Seconds | None = None,
        debounce_key: str | None = None,
        debounce_max_delay: Seconds | None = None,
        allow_unregistered: bool = False,
        tags: Mapping[str, str] | None = None,
    ) -> StartedAndSent:
        """Starts a workflow unless one was already started under `workflow_id`, and sends it
        `message` on `topic` (taken with `ctx.recv(topic)`), in one transaction: the message is
        there before the workflow first runs, and neither happens without the other. Give a
        `workflow_id` to reach the same workflow every time — one per customer, say, fed by
        events — and an `idempotency_key` to deliver once: the same id and key again start
        nothing and send nothing (`handle.created` False, `duplicate` True, the first call's
        `message_id`).

        The start options are `start`'s, but a debounced start (`debounce_key`) is refused
        (`RpcError` code INVALID_ARGUMENT): collapsed onto another start, the workflow might
        never run as itself. A workflow under the id that ended with an outcome (succeeded or
        failed) takes no more messages (code FAILED_PRECONDITION, reason WORKFLOW_NOT_RUNNING);
        another workflow name under the id is reason WORKFLOW_ID_CONFLICT.

        Retried while the server is unavailable only with an `idempotency_key`: without one, a
        retry whose first attempt got through would find the workflow started and send the
        message again."""
        req = workflow_pb2.StartAndSendRequest(
            start=_start_request(
                workflow_name,
                input,
                workflow_id=workflow_id,
                queue=queue,
                app_version=app_version,
                timeout=timeout,
                priority=priority,
                partition_key=partition_key,
                dedup_id=dedup_id,
                return_existing=return_existing,
                delay=delay,
                debounce_key=debounce_key,
                debounce_max_delay=debounce_max_delay,
                allow_unregistered=allow_unregistered,
                tags=tags,
            ),
            topic=topic,
            message=to_payload(message),
            idempotency_key=idempotency_key or "",
        )
        retry_for = self._patience if idempotency_key else 0.0
        r = await call(self._rpc.StartAndSend, req, retry_for=retry_for)
        wf = Workflow.from_proto(r.workflow)
        handle = WorkflowHandle(
            self,
            wf.workflow_id,
            workflow=wf,
            created=r.created,
            name_registered=r.name_registered,
        )
        return StartedAndSent(handle, r.message_id, r.duplicate)

    def handle(self, workflow_id: str) -> WorkflowHandle:
        """A handle on an existing workflow, without a call."""
        return WorkflowHandle(self, workflow_id)

    async def get(self, workflow_id: str) -> Workflow:
        r = await call(
            self._rpc.GetWorkflow,
            workflow_pb2.GetWorkflowRequest(workflow_id=workflow_id),
            retry_for=self._patience,
        )
        return Workflow.from_proto(r.workflow)

    async def list(
        self,
        *,
        statuses: builtins.list[WorkflowStatus] | None = None,
        workflow_name: str | None = None,
        queue: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        page_size: int = 0,
        page_token: str | None = None,
        tags: Mapping[str, str] | None = None,
        worker_id: str | None = None,
        app_version: str | None = None,
        parent_workflow_id: str | None = None,
    ) -> Page:
        """One page of workflows, newest first. Pass its `next_page_token` as `page_token` for
        the next page, until it is None: a short page is not necessarily the last. Every filter
        given must match: with `tags`, only workflows carrying every one of them (key and
        value); `worker_id`, those running on (PENDING) or last run by that worker;
        `app_version`, those pinned to that version; `parent_workflow_id`, that workflow's
        children."""
        req = workflow_pb2.ListWorkflowsRequest(
            statuses=[types_pb2.WorkflowStatus.ValueType(s.value) for s in statuses or []],
            workflow_name=workflow_name or "",
            queue_name=queue or "",
            page_size=page_size,
            page_token=page_token or "",
            tags=tags or {},
            worker_id=worker_id or "",
            app_version=app_version or "",
            parent_workflow_id=parent_workflow_id or "",
        )
        if created_after is not None:
            req.created_after.CopyFrom(to_timestamp(created_after))
        if created_before is not None:
            req.created_before.CopyFrom(to_timestamp(created_before))
        r = await call(self._rpc.ListWorkflows, req, retry_for=self._patience)
        return Page([Workflow.from_proto(w) for w in r.workflows], r.next_page_token or None)

    async def wait(self, workflow_id: str, timeout: Seconds | None = None) -> Workflow:
        """Waits until the workflow is terminal and returns it, whatever its outcome. Past
        `timeout`, raises `RpcError` with reason DEADLINE_EXCEEDED."""
        r = await call(
            self._rpc.AwaitWorkflow,
            workflow_pb2.AwaitWorkflowRequest(workflow_id=workflow_id),
            None if timeout is None else seconds(timeout),
            retry_for=self._patience,
        )
        return Workflow.from_proto(r.workflow)

    async def result(self, workflow_id: str, timeout: Seconds | None = None) -> Any:
        """Waits for the workflow and returns its output; raises `WorkflowFailed` when it
        failed, was cancelled or dead-lettered."""
        wf = await self.wait(workflow_id, timeout)
        if wf.status is WorkflowStatus.SUCCESS:
            return wf.output
        failure = wf.failure
        kind = failure.kind if failure else wf.status.name.title().replace("_", "")
        message = failure.message if failure else f"workflow is {wf.status.name}"
        raise WorkflowFailed(kind, message, workflow_id=workflow_id, status=wf.status.name)

    async def steps(self, workflow_id: str) -> builtins.list[Step]:
        """Every recorded step of the workflow, in order (read a page at a time)."""
        req = workflow_pb2.ListStepsRequest(workflow_id=workflow_id)
        return await read_all(
            self._rpc.ListSteps,
            req,
            lambda r: map(Step.from_proto, r.steps),
            retry_for=self._patience,
        )

    async def history(self, workflow_id: str) -> dict[str, Any]:
        """The workflow's history as a `Replayer` replays it (the format of the project's
        `contract/histories/`): its id, name and input, and every recorded step with its output
        or failure. Saved as JSON, it lets a test suite replay changed workflow code against
        workflows already running before the change is deployed."""
        wf = await self.get(workflow_id)
        steps = await self.steps(workflow_id)
        return {
            "workflow_id": wf.workflow_id,
            "workflow_name": wf.workflow_name,
            "input": wf.input,
            "steps": [_recorded(s) for s in steps],
        }

    async def fork(
        self,
        workflow_id: str,
        *,
        from_step: int | None = None,
        new_id: str | None = None,
        app_version: str | None = None,
        queue: str | None = None,
    ) -> WorkflowHandle:
        """Starts a new workflow from `workflow_id` (finished or not): the same name and input,
        with the source's recorded steps before `from_step` copied (all of them when None), so
        the fork replays up to there and runs on from `from_step` — on `app_version`'s workers
        if given (the source's otherwise: the way to rerun a failed workflow on fixed code), on
        `queue` if given (the source's otherwise). The fork's `forked_from_workflow_id` and
        `forked_from_step` record its lineage. Its id is `new_id`, else one made here (a UUID),
        so that a fork retried because the server was unavailable is sent with the same id and
        returns the fork its first attempt made. An id used by another workflow is `RpcError`
        reason WORKFLOW_ID_CONFLICT; a source that does not exist is NOT_FOUND."""
        req = workflow_pb2.ForkWorkflowRequest(
            workflow_id=workflow_id,
            new_workflow_id=new_id or str(uuid.uuid4()),
            app_version=app_version or "",
            queue_name=queue or "",
        )
        if from_step is not None:
            req.from_step = from_step
        r = await call(self._rpc.ForkWorkflow, req, retry_for=self._patience)
        wf = Workflow.from_proto(r.workflow)
        return WorkflowHandle(self, wf.workflow_id, workflow=wf)

    async def delay(self, workflow_id: str, delay: Seconds) -> Workflow:
        """Moves the start of a workflow still waiting for its delayed start. Not retried when
        the server is unavailable."""
        req = workflow_pb2.DelayWorkflowRequest(workflow_id=workflow_id, delay=to_duration(delay))
        r = await call(self._rpc.DelayWorkflow, req)
        return Workflow.from_proto(r.workflow)


class WorkflowHandle:
    """A started (or looked-up) workflow: wait for it, cancel it, message it, update it."""

    def __init__(
        self,
        client: Client,
        workflow_id: str,
        *,
        workflow: Workflow | None = None,
        created: bool = False,
        name_registered: bool = True,
    ) -> None:
        self.client = client
        self.workflow_id = workflow_id
        # The workflow as the start returned it (None for a handle made by `client.handle`).
        self.workflow = workflow
        # False when the start returned a workflow that already existed.
        self.created = created
        # False when no worker had registered the workflow's name at the start (a start with
        # `allow_unregistered`): it waits until one does. True for a handle made by
        # `client.handle`, which knows nothing of its start.
        self.name_registered = name_registered

    def __repr__(self) -> str:
        return f"WorkflowHandle({self.workflow_id!r})"

    async def result(self, timeout: Seconds | None = None) -> Any:
        return await self.client.result(self.workflow_id, timeout)

    async def wait(self, timeout: Seconds | None = None) -> Workflow:
        return await self.client.wait(self.workflow_id, timeout)

    async def get(self) -> Workflow:
        return await self.client.get(self.workflow_id)

    async def cancel(self, *, cascade: bool = False) -> Workflow:
        return await self.client.cancel(self.workflow_id, cascade=cascade)

    async def send(
        self, message: Any, *, topic: str = "", idempotency_key: str | None = None
    ) -> str:
        message_id, _ = await self.client.send(
            self.workflow_id, message, topic=topic, idempotency_key=idempotency_key
        )
        return message_id

    async def get_event(
        self, key: str, *, timeout: Seconds | None = None, default: Any = None
    ) -> Any:
        return await self.client.get_event(self.workflow_id, key, timeout=timeout, default=default)

    def read_stream(self, key: str, *, from_offset: int = 0) -> AsyncIterator[StreamEntry]:
        return self.client.read_stream(self.workflow_id, key, from_offset=from_offset)

    async def update(
        self,
        name: str,
        args: Any = None,
        *,
        update_id: str | None = None,
        timeout: Seconds | None = None,
    ) -> Any:
        return await self.client.update_workflow(
            self.workflow_id, name, args, update_id=update_id, timeout=timeout
        )


def _recorded(s: Step) -> dict[str, Any]:
    """One step of `Client.history`: a failure, or else an output (`null` included)."""
    if s.failure is not None:
        failure = {"kind": s.failure.kind, "message": s.failure.message}
        return {"step_id": s.step_id, "name": s.name, "failure": failure}
    return {"step_id": s.step_id, "name": s.name, "output": s.output}


def _start_request(
    workflow_name: str,
    input: Any,
    *,
    workflow_id: str | None,
    queue: str | None,
    app_version: str | None,
    timeout: Seconds | None,
    priority: int,
    partition_key: str | None,
    dedup_id: str | None,
    return_existing: bool,
    delay: Seconds | None,
    debounce_key: str | None,
    debounce_max_delay: Seconds | None,
    allow_unregistered: bool,
    tags: Mapping[str, str] | None,
) -> workflow_pb2.StartWorkflowRequest:
    """The request of `Client.start` (and the start of `Client.start_and_send`). The workflow id
    is made here when not given, so that a retried request is the same start."""
    req = workflow_pb2.StartWorkflowRequest(
        workflow_name=workflow_name,
        workflow_id=workflow_id or str(uuid.uuid4()),
        input=to_payload(input),
        queue_name=queue or "",
        app_version=app_version or "",
        priority=priority,
        partition_key=partition_key or "",
        dedup_id=dedup_id or "",
        on_duplicate=(
            workflow_pb2.DUPLICATE_POLICY_RETURN_EXISTING
            if return_existing
            else workflow_pb2.DUPLICATE_POLICY_UNSPECIFIED
        ),
        allow_unregistered=allow_unregistered,
        tags=tags or {},
    )
    if timeout is not None:
        req.timeout.CopyFrom(to_duration(timeout))
    if delay is not None:
        req.delay.CopyFrom(to_duration(delay))
    if debounce_key is not None:
        req.debounce.key = debounce_key
        if debounce_max_delay is not None:
            req.debounce.max_delay.CopyFrom(to_duration(debounce_max_delay))
    return req
