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
    /// Keys (and, later, namespaces).
    Administer,
}

/// Methods of the client services that only read.
const READS: [&str; 13] = [
    "/waymark.v1.WorkflowService/GetWorkflow",
    "/waymark.v1.WorkflowService/ListWorkflows",
    "/waymark.v1.WorkflowService/AwaitWorkflow",
    "/waymark.v1.WorkflowService/ListSteps",
    "/waymark.v1.WorkflowService/ListMessages",
    "/waymark.v1.WorkflowService/GetEvent",
    "/waymark.v1.WorkflowService/ListEvents",
    "/waymark.v1.WorkflowService/ReadStream",
    "/waymark.v1.QueueService/GetQueue",
    "/waymark.v1.QueueService/ListQueues",
    "/waymark.v1.ScheduleService/GetSchedule",
    "/waymark.v1.ScheduleService/ListSchedules",
    "/waymark.v1.WorkerService/ListWorkers",
];

/// The access a call on `path` needs. Anything not known is administrative: an RPC added
/// without a decision here is refused to everyone but admins.
pub fn required(path: &str) -> Access {
    if path.starts_with("/grpc.health.v1.Health/") || path.starts_with("/grpc.reflection.") {
        Access::Open
    } else if READS.contains(&path) {
        Access::Read
    } else if path == "/waymark.v1.WorkerService/Connect" {
        Access::Work
    } else if ["WorkflowService", "QueueService", "ScheduleService"]
        .iter()
        .any(|s| path.starts_with(&format!("/waymark.v1.{s}/")))
    {
        Access::Write
    } else {
        Access::Administer
    }
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
    fn every_method_is_classified_on_purpose() {
        let methods = all_methods();
        assert!(methods.len() > 30, "{methods:?}");
        for m in &methods {
            let name = m.rsplit('/').next().unwrap();
            let expected = if m.contains("AdminService") {
                Access::Administer
            } else if ["Get", "List", "Await", "Read"].iter().any(|p| name.starts_with(p)) {
                Access::Read
            } else if m.contains("WorkerService") {
                Access::Work
            } else {
                Access::Write
            };
            assert_eq!(required(m), expected, "{m}");
        }
        for r in READS {
            assert!(methods.iter().any(|m| m == r), "{r} is not a method of the contract");
        }
        assert_eq!(required("/grpc.health.v1.Health/Check"), Access::Open);
        assert_eq!(required("/waymark.v1.Unknown/Thing"), Access::Administer);
    }

    #[test]
    fn roles_grant_what_they_name() {
        use Access::*;
        let table = [
            (Role::Reader, [true, true, false, false, false]),
            (Role::Client, [true, true, true, false, false]),
            (Role::Worker, [true, false, false, true, false]),
            (Role::Admin, [true, true, true, true, true]),
        ];
        for (role, grants) in table {
            for (access, granted) in [Open, Read, Write, Work, Administer].into_iter().zip(grants) {
                assert_eq!(role.may(access), granted, "{role:?} {access:?}");
            }
        }
    }
}
