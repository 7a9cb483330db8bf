-- Where a workflow and a remote-step call sit in a distributed trace (W3C Trace Context): the
-- span that started the workflow (or called the step), handed back on every dispatch so the
-- worker's spans join that trace, however often the work is recovered. NULL: no trace.
ALTER TABLE workflows ADD COLUMN traceparent TEXT;
ALTER TABLE workflows ADD COLUMN tracestate TEXT;
ALTER TABLE step_tasks ADD COLUMN traceparent TEXT;
ALTER TABLE step_tasks ADD COLUMN tracestate TEXT;
