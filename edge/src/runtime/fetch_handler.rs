//! The Worker's fetch handler: every request enters here.
//!
//! An operator route (`/metrics`, `/admin/…`) gets 404 here. Every other request first
//! takes a token from its client address's rate limiter (429 without one). A request to an
//! operation the policy guards is then read (body within the limit) and checked by the
//! [`Gate`]; a refusal is replied to here, and a well-formed attempt takes a token from its
//! user's limiter and goes through its (user, key) Durable Object and, when that says so, to the
//! backend, whose reply is reported back to the object. An attempt that finds its key in
//! flight and sent `Prefer: wait=N` is held by the object until the first attempt's reply
//! arrives (or its wait runs out), and never reaches the backend. Everything else is forwarded
//! unchanged. Errors never escape as a bare runtime error: they become problem+json replies, and
//! the details go to the log.
//!
//! Every request is the edge's span in a trace (`crate::trace`): the client's trace when its
//! `traceparent` is well formed, else a new one; every forward names the edge's span as the
//! backend's parent. Each branch says how the edge replied ([`EdgeHandling`]: forwarded,
//! replayed, held, refused, forward failed, edge error), and when the settings name a collector
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`) the span is exported after the reply. Every request is also
//! one data point in the edge's Analytics Engine dataset, where one is bound
//! ([`crate::trace::RequestPoint`]): the dashboard's count of the edge's refusals.

use std::time::Duration;

use futures_channel::oneshot;
use shared::prefer::{PREFER_HEADER, requested_wait};
use shared::{Operation, Problem, ProblemKind};
use worker::{Env, Request, Response, Result, console_error, console_log, event};

use super::body::{discard_unread_body, read_body_within};
use super::clock::{millis, now_ms};
use super::coordinator_client::CoordinatorClient;
use super::cross_origin::readable_by_listed_origin;
use super::forward::{BackendReply, forward_buffered, forward_unchanged};
use super::identity;
use super::rate_limiter_client::take_token;
use super::request_points::write_request_point;
use super::response::reply_response;
use super::trace_export::{export_span, trace_of};
use crate::config::{EdgeConfig, JWT_SECRET_VAR, PROOF_SECRET_VAR, compiled_policy};
use crate::coordination::{BeginRequest, FinishReport};
use crate::forward_rules::{ForwardFailure, new_request_id};
use crate::gate::{Attempt, BodyRead, Gate, GuardedRequest, Verdict};
use crate::header_bytes::header_bytes;
use crate::operator_routes::{self, is_operator_route};
use crate::rate_limit::{CLIENT_ADDRESS_HEADER, ClientAddress, Limit, Requester};
use crate::reply::Reply;
use crate::trace::{EdgeHandling, EdgeSpan, RequestPoint, TraceContext};

/// The entry point: replies to every request, turning an unexpected error into a 500 problem. A
/// body nothing read (the reply did not need it) is read to its end first, so the client,
/// still sending, gets the reply rather than a reset connection.
#[event(fetch)]
async fn fetch(request: Request, env: Env, context: worker::Context) -> Result<Response> {
    let response = serve(&request, &env, &context).await;
    discard_unread_body(&request).await;
    response
}

/// A reply and how the edge came to it, for its span.
struct Served {
    /// The span's `edge.handling`: which branch replied.
    handling: EdgeHandling,
    /// What the client gets.
    response: Response,
}

impl Served {
    /// A reply the edge makes itself.
    fn reply(handling: EdgeHandling, reply: Reply) -> Result<Served> {
        let response = reply_response(reply)?;
        Ok(Served { handling, response })
    }

    /// A refusal the edge makes itself, before the backend.
    fn refused(reply: Reply) -> Result<Served> {
        Served::reply(EdgeHandling::Refused, reply)
    }
}

/// Reads the settings and serves the request as the edge's span of its trace, exported after
/// the reply when a collector is configured, and counts it in the requests' dataset.
async fn serve(request: &Request, env: &Env, context: &worker::Context) -> Result<Response> {
    let start_ms = now_ms();
    let config = match edge_config(env) {
        Ok(config) => config,
        Err(error) => {
            console_error!("the edge is misconfigured: {error}");
            return reply_response(Reply::problem(&internal_problem()));
        }
    };
    let trace = trace_of(request);
    let served = match handle(request, &config, &trace, env, context).await {
        Ok(served) => served,
        Err(error) => {
            console_error!("edge error: {error}");
            Served::reply(EdgeHandling::EdgeError, Reply::problem(&internal_problem()))?
        }
    };
    let (method, path) = (request.method().to_string(), request.path());
    let status = served.response.status_code();
    let operation = Operation::match_path(&method, &path).map(|(operation, _)| operation);
    write_request_point(
        env,
        RequestPoint::new(served.handling, status, &method, operation),
    );
    if let Some(export) = config.span_export() {
        let span = EdgeSpan {
            trace: &trace,
            method: &method,
            path: &path,
            status,
            handling: served.handling,
            start_ms,
            end_ms: now_ms(),
        };
        export_span(context, export, &span);
    }
    let origins = config.allowed_origins();
    readable_by_listed_origin(request, origins, served.handling, served.response)
}

/// Passes the request through or guards it.
async fn handle(
    request: &Request,
    config: &EdgeConfig,
    trace: &TraceContext,
    env: &Env,
    context: &worker::Context,
) -> Result<Served> {
    let path = request.path();
    if is_operator_route(&path) {
        return Served::refused(Reply::problem(&operator_routes::not_found()));
    }
    let limits = config.rate_limits();
    let address =
        ClientAddress::from_header(request.headers().get(CLIENT_ADDRESS_HEADER)?.as_deref());
    if let Some(limited) = over_limit(env, Requester::Address(address), limits.per_address).await {
        return Served::refused(limited);
    }
    let policy = compiled_policy();
    let gate = Gate::new(policy);
    let Some(route) = gate.route(request.method().as_ref(), &path) else {
        // The edge's proof covers the body, so it is read first where the proof is made.
        let body = match config.proof_secret() {
            None => None,
            Some(_) => match read_body_within(request, gate.body_limits().max_bytes).await {
                BodyRead::Complete(body) => Some(body),
                BodyRead::TooLarge => {
                    let too_large = Problem::body_too_large(gate.body_limits().max_bytes);
                    return Served::refused(Reply::problem(&too_large));
                }
                BodyRead::Unreadable => {
                    return Served::refused(Reply::problem(&Problem::body_unreadable()));
                }
            },
        };
        let request_id = new_request_id();
        let forwarded =
            forward_unchanged(request, body.as_deref(), config, &request_id, trace).await;
        return match forwarded {
            Ok(response) => Ok(Served {
                handling: EdgeHandling::Forwarded,
                response,
            }),
            Err(failure) => failure_reply(failure, config),
        };
    };
    let body = read_body_within(request, gate.body_limits().max_bytes).await;
    let headers = request.headers();
    let authorization = headers
        .get("authorization")?
        .map(|value| header_bytes(&value));
    let key_bytes: Vec<Vec<u8>> = headers
        .get(&policy.header)?
        .map(|value| header_bytes(&value))
        .into_iter()
        .collect();
    let key_values: Vec<&[u8]> = key_bytes.iter().map(Vec::as_slice).collect();
    let checked = GuardedRequest {
        user: identity::user_of(config, authorization.as_deref()).await,
        key_header_values: &key_values,
        body,
    };
    match gate.check(&route, checked) {
        Verdict::Unauthenticated(reason) => {
            console_log!("request refused: not authenticated: {reason}");
            Served::refused(Reply::problem(&Problem::from(&reason)))
        }
        Verdict::Reject(problem) => Served::refused(Reply::problem(&problem)),
        Verdict::Coordinate { attempt, body } => {
            let user = Requester::User(attempt.user.clone());
            if let Some(limited) = over_limit(env, user, limits.per_user).await {
                return Served::refused(limited);
            }
            let prefer = headers
                .get(PREFER_HEADER)?
                .map(|value| header_bytes(&value));
            let wait = requested_wait(prefer.as_deref(), policy.max_wait);
            let coordinated = Coordinated {
                attempt: &attempt,
                body,
                wait,
                trace,
            };
            coordinate_and_forward(request, coordinated, config, env, context).await
        }
    }
}

/// The 429 for a requester over `limit`, or `None` when the request goes on. A limiter that
/// cannot be reached does not stop the request: the limit protects capacity, and refusing every
/// payment because of it would turn a limiter fault into an outage.
async fn over_limit(env: &Env, requester: Requester, limit: Limit) -> Option<Reply> {
    match take_token(env, &requester, limit).await {
        Ok(verdict) => verdict.edge_reply(),
        Err(error) => {
            console_error!(
                "rate limiter {} unavailable, not limiting: {error}",
                requester.limiter_name()
            );
            None
        }
    }
}

/// A checked attempt of a guarded operation, ready for its key's object.
struct Coordinated<'a> {
    attempt: &'a Attempt,
    /// The body as read and checked.
    body: Vec<u8>,
    /// How long it may wait for the key's first attempt (`Prefer: wait`, capped by the policy).
    wait: Option<Duration>,
    /// Its trace, which the forward carries.
    trace: &'a TraceContext,
}

/// One attempt of a guarded operation: asks the key's object, and forwards only if it says so.
async fn coordinate_and_forward(
    request: &Request,
    coordinated: Coordinated<'_>,
    config: &EdgeConfig,
    env: &Env,
    context: &worker::Context,
) -> Result<Served> {
    let Coordinated {
        attempt,
        body,
        wait,
        trace,
    } = coordinated;
    let request_id = new_request_id();
    let coordinator = CoordinatorClient::for_attempt(env, attempt)?;
    let begin = BeginRequest {
        attempt_id: request_id.clone(),
        fingerprint: attempt.fingerprint,
        mark_for_ms: millis(config.in_flight_mark_lifetime()),
        wait_ms: wait.map_or(0, millis),
    };
    match coordinator.begin(&begin).await {
        Ok(verdict) => {
            if let Some(reply) = verdict.edge_reply(wait) {
                return Served::reply(EdgeHandling::of_key_object(&verdict), reply);
            }
        }
        Err(error) => {
            // The backend stays the authority: without the object it still does the work once.
            console_error!("key coordinator unavailable, forwarding uncoordinated: {error}");
            let forwarded = forward_buffered(request, &body, config, &request_id, trace).await;
            return forwarded_reply(forwarded, config);
        }
    }
    // The forward and the report to the object run as a `wait_until` task: a phone that times
    // out and disconnects must not cancel them, or its key would stay marked in flight until the
    // alarm instead of holding the finished reply for the phone's next retry.
    let (forward_done, forward_result) = oneshot::channel();
    let outgoing = request.clone()?;
    let task_config = config.clone();
    let task_trace = trace.clone();
    let fingerprint = attempt.fingerprint;
    context.wait_until(async move {
        let forwarded =
            forward_buffered(&outgoing, &body, &task_config, &request_id, &task_trace).await;
        let saved = match &forwarded {
            Ok(backend) => backend.saved_reply(),
            Err(failure) => {
                let problem = failure.problem(task_config.backend_timeout());
                Some(Reply::problem(&problem).to_saved_reply())
            }
        };
        let report = FinishReport {
            attempt_id: request_id,
            fingerprint,
            reply: saved,
            keep_reply: task_config.keeps_replies(),
        };
        if let Err(error) = coordinator.finish(&report).await {
            console_error!(
                "could not report to the key coordinator; its mark lapses by alarm: {error}"
            );
        }
        // The phone may be gone; then nobody is waiting for the reply, and that is fine.
        let _ = forward_done.send(forwarded);
    });
    match forward_result.await {
        Ok(forwarded) => forwarded_reply(forwarded, config),
        Err(_) => Served::reply(EdgeHandling::EdgeError, Reply::problem(&internal_problem())),
    }
}

/// The backend's reply, or the problem for a failed forward.
fn forwarded_reply(
    forwarded: std::result::Result<BackendReply, ForwardFailure>,
    config: &EdgeConfig,
) -> Result<Served> {
    match forwarded {
        Ok(backend) => Ok(Served {
            handling: EdgeHandling::Forwarded,
            response: backend.into_response(),
        }),
        Err(failure) => failure_reply(failure, config),
    }
}

/// The problem for a forward that got no reply from the backend.
fn failure_reply(failure: ForwardFailure, config: &EdgeConfig) -> Result<Served> {
    let problem = failure.problem(config.backend_timeout());
    Served::reply(EdgeHandling::from(failure), Reply::problem(&problem))
}

/// The settings from the runtime's environment (`[vars]`, and the secret).
fn edge_config(env: &Env) -> std::result::Result<EdgeConfig, crate::config::ConfigError> {
    EdgeConfig::from_settings(|name| {
        let value = if name == JWT_SECRET_VAR || name == PROOF_SECRET_VAR {
            env.secret(name).map(|value| value.to_string())
        } else {
            env.var(name).map(|value| value.to_string())
        };
        value.ok()
    })
}

fn internal_problem() -> Problem {
    Problem::new(
        ProblemKind::Internal,
        "An internal error occurred at the edge; it has been logged.",
    )
}
