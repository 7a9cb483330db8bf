//! The gRPC surface: tonic services that convert requests, call the [`Engine`], and map errors
//! to statuses. No decisions are made here.

use std::{future::Future, sync::Arc, time::Duration};

use tonic::transport::{Server, ServerTlsConfig};
use waymark_proto::v1::{
    admin_service_server::AdminServiceServer, queue_service_server::QueueServiceServer,
    schedule_service_server::ScheduleServiceServer, worker_service_server::WorkerServiceServer,
    workflow_service_server::WorkflowServiceServer,
};

use crate::{
    auth::Authenticator,
    console::ConsoleInfo,
    engine::Engine,
    namespaces::{Namespace, Namespaces, DEFAULT},
};

pub mod admin_service;
pub mod audit;
pub mod authn;
pub mod guard;
pub mod observe;
pub mod open_stream;
pub mod queue_service;
pub mod schedule_service;
pub mod worker;
pub mod workflow_lifecycle;
pub mod workflow_service;

pub use crate::wire::{convert, status};

/// The engine of the namespace a call names (set by the authentication layer; `default`).
pub(crate) async fn engine_for<T>(
    namespaces: &Namespaces,
    req: &tonic::Request<T>,
) -> Result<Arc<Engine>, tonic::Status> {
    namespaces.engine(namespace_of(req)).await.map_err(status::to_status)
}

/// The address a call came from, over plain TCP or TLS (`None` off TCP).
pub(crate) fn peer_addr(extensions: &http::Extensions) -> Option<std::net::SocketAddr> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    extensions
        .get::<TcpConnectInfo>()
        .or_else(|| extensions.get::<TlsConnectInfo<TcpConnectInfo>>().map(|t| t.get_ref()))
        .and_then(|i| i.remote_addr())
}

/// The namespace a call acts in (set by the authentication layer).
pub(crate) fn namespace_of<T>(req: &tonic::Request<T>) -> &str {
    req.extensions().get::<Namespace>().map_or(DEFAULT, |n| n.0.as_str())
}

/// The verified caller of a call; `None` when authentication is off.
pub(crate) fn caller<T>(req: &tonic::Request<T>) -> Option<Arc<crate::auth::Principal>> {
    req.extensions().get::<Arc<crate::auth::Principal>>().cloned()
}

/// Every method of every Waymark service (`/waymark.v1.WorkflowService/StartWorkflow`), from the
/// compiled contract.
pub fn contract_methods() -> &'static [String] {
    static METHODS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        use prost::Message;
        let set = prost_types::FileDescriptorSet::decode(waymark_proto::FILE_DESCRIPTOR_SET).expect("the contract");
        let mut paths = Vec::new();
        for f in set.file {
            for s in &f.service {
                for m in &s.method {
                    paths.push(format!("/{}.{}/{}", f.package(), s.name(), m.name()));
                }
            }
        }
        paths
    });
    &METHODS
}

/// Who may connect and call: TLS (with client certificates when it names a client CA) and the
/// API keys checked on every call.
pub struct Security {
    pub tls: Option<ServerTlsConfig>,
    pub auth: Arc<Authenticator>,
    /// Which answered calls leave an access line.
    pub access_log: observe::AccessLog,
}

/// The web console's port ([`crate::console`]): the app's files and the API over gRPC-web.
pub struct ConsoleDoor {
    pub listener: tokio::net::TcpListener,
    /// What WhoAmI tells of it (its URL, whether it is read-only).
    pub info: ConsoleInfo,
}

/// Serves every service on `listener` (and on the console's port, when there is one) until
/// `shutdown` resolves, then lets in-flight calls end.
pub async fn serve(
    namespaces: Arc<Namespaces>,
    security: Security,
    listener: tokio::net::TcpListener,
    console: Option<ConsoleDoor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let engine = namespaces.default_engine().clone();
    // Room above the payload limit for the rest of the message, so an oversized payload gets our
    // PAYLOAD_TOO_LARGE rather than a transport error.
    let max_message = engine.config().max_payload_bytes + 1024 * 1024;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(waymark_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        // google.rpc.ErrorInfo and friends, so grpcurl can show error details.
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .expect("descriptor set is valid");
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(waymark_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .expect("descriptor set is valid");
    let (health, health_service) = tonic_health::server::health_reporter();
    set_health(&health, true).await;
    // Every service follows the database: NOT_SERVING while it cannot be reached, SERVING
    // again when it answers (until the replica drains, which turns it off for good).
    tokio::spawn({
        let (health, engine) = (health.clone(), engine.clone());
        let mut reachable = engine.store_reachable();
        async move {
            while reachable.changed().await.is_ok() {
                let up = *reachable.borrow_and_update();
                if engine.is_shutting_down() {
                    return;
                }
                set_health(&health, up).await;
            }
        }
    });

    // A workflow read back carries its input and its output (each up to a payload): answers
    // get room for both, so a workflow that was accepted can always be read.
    let workflows = WorkflowServiceServer::new(workflow_service::WorkflowApi {
        namespaces: namespaces.clone(),
    })
    .max_decoding_message_size(max_message)
    .max_encoding_message_size(engine.config().max_worker_message_bytes() * 2);
    let workers = WorkerServiceServer::new(worker::WorkerApi {
        namespaces: namespaces.clone(),
    })
    .max_decoding_message_size(engine.config().worker_decode_limit())
    .max_encoding_message_size(engine.config().max_dispatch_bytes());

    let queues = QueueServiceServer::new(queue_service::QueueApi {
        namespaces: namespaces.clone(),
    });
    let schedules = ScheduleServiceServer::new(schedule_service::ScheduleApi {
        namespaces: namespaces.clone(),
    })
    .max_decoding_message_size(max_message)
    .max_encoding_message_size(max_message);
    let admin = AdminServiceServer::new(admin_service::AdminApi {
        auth: security.auth.clone(),
        namespaces: namespaces.clone(),
        console: console.as_ref().map(|c| c.info.clone()).unwrap_or_default(),
    });
    // The API, as both ports serve it.
    let routes = tonic::service::Routes::new(workflows)
        .add_service(workers)
        .add_service(queues)
        .add_service(schedules)
        .add_service(admin);
    // Both ports stop together: the console's when the API's drain begins.
    let (stopping, stop) = tokio::sync::watch::channel(false);

    let drained = {
        let namespaces = namespaces.clone();
        async move {
            shutdown.await;
            let _ = stopping.send(true);
            tracing::info!("draining: no new dispatches; in-flight requests finish");
            health
                .set_not_serving::<WorkflowServiceServer<workflow_service::WorkflowApi>>()
                .await;
            for engine in namespaces.all().await {
                engine.begin_shutdown().await;
            }
        }
    };
    // Set on every accepted connection: the builder's own tcp_nodelay only applies to listeners
    // it binds itself. Without it, small stream messages (a reply, then a wakeup) wait out
    // Nagle's algorithm and delayed ACKs: tens of milliseconds.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut builder = Server::builder();
    if let Some(tls) = security.tls.clone() {
        builder = builder.tls_config(tls)?;
    }
    let observe = observe::ObserveLayer {
        access_log: security.access_log,
    };
    let guard = guard::CallGuardLayer {
        request_timeout: engine.config().request_timeout,
    };
    let authn = authn::AuthLayer {
        auth: security.auth.clone(),
    };
    let api = builder
        .layer(observe.clone())
        .layer(guard.clone())
        .layer(authn.clone())
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        .http2_keepalive_timeout(Some(Duration::from_secs(60)))
        .add_routes(routes.clone())
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(incoming, drained);
    let Some(console) = console else {
        return api.await;
    };
    // The console's port: its files, and the same API behind the same layers, over gRPC-web
    // (HTTP/1.1 as browsers speak it).
    let incoming = tonic::transport::server::TcpIncoming::from(console.listener).with_nodelay(Some(true));
    let mut builder = Server::builder().accept_http1(true);
    if let Some(tls) = security.tls {
        builder = builder.tls_config(tls)?;
    }
    let gate = crate::console::gate::ConsoleGateLayer {
        read_only: console.info.read_only,
        check_host: !security.auth.enabled,
    };
    let mut stop = stop;
    let console = builder
        .layer(gate)
        .layer(tonic_web::GrpcWebLayer::new())
        .layer(observe)
        .layer(guard)
        .layer(authn)
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop.wait_for(|s| *s).await;
        });
    let (api, console) = tokio::join!(api, console);
    api.and(console)
}

/// Sets every Waymark service (and the server as a whole, the empty service name) to SERVING or
/// NOT_SERVING.
async fn set_health(health: &tonic_health::server::HealthReporter, serving: bool) {
    use tonic::server::NamedService;
    let status = if serving {
        tonic_health::ServingStatus::Serving
    } else {
        tonic_health::ServingStatus::NotServing
    };
    for name in [
        "",
        <WorkflowServiceServer<workflow_service::WorkflowApi> as NamedService>::NAME,
        <WorkerServiceServer<worker::WorkerApi> as NamedService>::NAME,
        <QueueServiceServer<queue_service::QueueApi> as NamedService>::NAME,
        <ScheduleServiceServer<schedule_service::ScheduleApi> as NamedService>::NAME,
        <AdminServiceServer<admin_service::AdminApi> as NamedService>::NAME,
    ] {
        health.set_service_status(name, status).await;
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn termination() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
