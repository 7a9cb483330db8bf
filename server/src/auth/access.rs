//! What each call needs: which role may make it, decided from its gRPC method path alone, so
//! the check runs before any service code and a new RPC is refused until it is classified.

use super::Role;

/// What a call does, in the terms roles are granted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Health checks and reflection: no key needed (load balancers, grpcurl's listing). They
    /// reveal the schema, which is public, and nothing stored.
    Open,
    /// Reads workflows, steps, messages, events, streams, queues or schedules.
    Read,
    /// Changes them: start, cancel, resume, delay, send; queue and schedule changes.
    Write,
    /// The worker stream.
    Work,
    /// Keys, and the namespaces an admin key lists (what it may see of them).
    Administer,
    /// Namespaces themselves (create, delete, their limits): only an admin key of every
    /// namespace (`*`).
    Server,
}

/// Every method of the contract and the access it needs: the access table. A method not in it
/// is administrative (`required` says so), and the test below fails until a new RPC has its row,
/// so one is never let in by accident. `integration-tests/tests/access.rs` calls every row over
/// the wire with no key, with each role and from another namespace, and checks the answer
/// against this table.
pub const TABLE: &[(&str, Access)] = {
    use Access::*;
    &[
        ("/waymark.v1.WorkflowService/StartWorkflow", Write),
        ("/waymark.v1.WorkflowService/GetWorkflow", Read),
        ("/waymark.v1.WorkflowService/ListWorkflows", Read),
        ("/waymark.v1.WorkflowService/AwaitWorkflow", Read),
        ("/waymark.v1.WorkflowService/ListSteps", Read),
        ("/waymark.v1.WorkflowService/CancelWorkflow", Write),
        ("/waymark.v1.WorkflowService/ResumeWorkflow", Write),
        ("/waymark.v1.WorkflowService/SendMessage", Write),
        ("/waymark.v1.WorkflowService/StartAndSend", Write),
        ("/waymark.v1.WorkflowService/UpdateWorkflow", Write),
        ("/waymark.v1.WorkflowService/ListMessages", Read),
        ("/waymark.v1.WorkflowService/GetEvent", Read),
        ("/waymark.v1.WorkflowService/ListEvents", Read),
        ("/waymark.v1.WorkflowService/ReadStream", Read),
        ("/waymark.v1.WorkflowService/ListStreams", Read),
        ("/waymark.v1.WorkflowService/DelayWorkflow", Write),
        ("/waymark.v1.WorkflowService/DeleteWorkflow", Write),
        ("/waymark.v1.WorkflowService/ForkWorkflow", Write),
        ("/waymark.v1.WorkflowService/SetWorkflowVersion", Write),
        ("/waymark.v1.WorkflowService/BulkWorkflows", Write),
        ("/waymark.v1.QueueService/CreateQueue", Write),
        ("/waymark.v1.QueueService/UpdateQueue", Write),
        ("/waymark.v1.QueueService/GetQueue", Read),
        ("/waymark.v1.QueueService/ListQueues", Read),
        ("/waymark.v1.QueueService/DeleteQueue", Write),
        ("/waymark.v1.ScheduleService/CreateSchedule", Write),
        ("/waymark.v1.ScheduleService/UpdateSchedule", Write),
        ("/waymark.v1.ScheduleService/GetSchedule", Read),
        ("/waymark.v1.ScheduleService/ListSchedules", Read),
        ("/waymark.v1.ScheduleService/DeleteSchedule", Write),
        ("/waymark.v1.ScheduleService/PauseSchedule", Write),
        ("/waymark.v1.ScheduleService/ResumeSchedule", Write),
        ("/waymark.v1.ScheduleService/TriggerSchedule", Write),
        ("/waymark.v1.ScheduleService/BackfillSchedule", Write),
        ("/waymark.v1.WorkerService/Connect", Work),
        ("/waymark.v1.WorkerService/ListWorkers", Read),
        ("/waymark.v1.AdminService/CreateApiKey", Administer),
        ("/waymark.v1.AdminService/ListApiKeys", Administer),
        ("/waymark.v1.AdminService/RevokeApiKey", Administer),
        ("/waymark.v1.AdminService/CreateNamespace", Server),
        ("/waymark.v1.AdminService/ListNamespaces", Administer),
        ("/waymark.v1.AdminService/DescribeNamespace", Administer),
        ("/waymark.v1.AdminService/UpdateNamespace", Server),
        ("/waymark.v1.AdminService/DeleteNamespace", Server),
        // Any key that may read may ask who it is (the console's sign-in).
        ("/waymark.v1.AdminService/WhoAmI", Read),
    ]
};

/// Whether a call on `path` only reads: a read, an open call, or an admin call that lists or
/// describes (keys, namespaces). What a read-only console lets through.
pub fn only_reads(path: &str) -> bool {
    match required(path) {
        Access::Read | Access::Open => true,
        Access::Administer => {
            let name = path.rsplit('/').next().unwrap_or_default();
            name.starts_with("List") || name.starts_with("Describe")
        }
        Access::Write | Access::Work | Access::Server => false,
    }
}

/// Calls about the caller's key rather than a namespace: no namespace is checked for them.
pub const KEY_ONLY: [&str; 1] = ["/waymark.v1.AdminService/WhoAmI"];

/// The access a call on `path` needs. Anything not in [`TABLE`] is administrative: an RPC added
/// without a row is refused to everyone but admins.
pub fn required(path: &str) -> Access {
    if path.starts_with("/grpc.health.v1.Health/") || path.starts_with("/grpc.reflection.") {
        return Access::Open;
    }
    TABLE
        .iter()
        .find(|(p, _)| *p == path)
        .map_or(Access::Administer, |(_, a)| *a)
}

impl Role {
    pub fn may(self, access: Access) -> bool {
        matches!(
            (self, access),
            (_, Access::Open)
                | (Role::Admin, _)
                | (Role::Reader, Access::Read)
                | (Role::Client, Access::Read | Access::Write)
                | (Role::Worker, Access::Work)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_methods() -> Vec<String> {
        crate::api::contract_methods().to_vec()
    }

    #[test]
    fn every_method_has_a_row_and_every_row_a_method() {
        let methods = all_methods();
        assert!(methods.len() > 30, "{methods:?}");
        for m in &methods {
            let rows = TABLE.iter().filter(|(p, _)| p == m).count();
            assert_eq!(rows, 1, "{m}: give it exactly one row in access::TABLE");
        }
        for (p, _) in TABLE {
            assert!(methods.iter().any(|m| m == p), "{p} is not a method of the contract");
        }
        // What a name promises agrees with its row: reads read, admin calls administer.
        for (p, access) in TABLE {
            let name = p.rsplit('/').next().unwrap();
            if p.ends_with("/WhoAmI") {
                assert_eq!(*access, Access::Read, "{p}");
            } else if p.contains("AdminService") {
                assert!(matches!(access, Access::Administer | Access::Server), "{p}");
            } else if ["Get", "List", "Await", "Read"].iter().any(|v| name.starts_with(v)) {
                assert_eq!(*access, Access::Read, "{p}");
            } else {
                assert_ne!(*access, Access::Read, "{p} changes something");
            }
        }
        assert_eq!(required("/grpc.health.v1.Health/Check"), Access::Open);
        // What a read-only console lets through: reads, and the admin lists.
        let reads: Vec<&str> = TABLE.iter().map(|(p, _)| *p).filter(|p| only_reads(p)).collect();
        for p in [
            "/waymark.v1.WorkflowService/ListWorkflows",
            "/waymark.v1.AdminService/ListApiKeys",
            "/waymark.v1.AdminService/ListNamespaces",
            "/waymark.v1.AdminService/DescribeNamespace",
            "/waymark.v1.AdminService/WhoAmI",
        ] {
            assert!(reads.contains(&p), "{p}");
        }
        for p in [
            "/waymark.v1.WorkflowService/CancelWorkflow",
            "/waymark.v1.AdminService/CreateApiKey",
            "/waymark.v1.AdminService/RevokeApiKey",
            "/waymark.v1.AdminService/DeleteNamespace",
            "/waymark.v1.WorkerService/Connect",
        ] {
            assert!(!only_reads(p), "{p}");
        }
        assert_eq!(required("/waymark.v1.Unknown/Thing"), Access::Administer);
    }

    #[test]
    fn roles_grant_what_they_name() {
        use Access::*;
        let table = [
            (Role::Reader, [true, true, false, false, false, false]),
            (Role::Client, [true, true, true, false, false, false]),
            (Role::Worker, [true, false, false, true, false, false]),
            (Role::Admin, [true, true, true, true, true, true]),
        ];
        for (role, grants) in table {
            for (access, granted) in [Open, Read, Write, Work, Administer, Server].into_iter().zip(grants) {
                assert_eq!(role.may(access), granted, "{role:?} {access:?}");
            }
        }
    }
}
