//! The Worker's fetch handler: every request enters here.
//!
//! An operator route (`/metrics`, `/admin/…`) is answered 404 here. Every other request first
//! takes a token from its client address's rate limiter (429 without one). A request to an
//! operation the policy guards is then read (body within the limit) and checked by the
//! [`Gate`]; a refusal is answered here, and a well-formed attempt takes a token from its
//! user's limiter and goes through its (user, key) Durable Object and, when that says so, to the
//! backend, whose answer is reported back to the object. An attempt that finds its key in
//! flight and sent `Prefer: wait=N` is held by the object until the first attempt's answer
//! arrives (or its wait runs out), and never reaches the backend. Everything else is forwarded
//! unchanged. Errors never escape as a bare runtime error: they become problem+json answers, and
//! the details go to the log.
//!
//! Every request is the edge's span in a trace (`crate::trace`): the client's trace when its
//! `traceparent` is well formed, else a new one; every forward names the edge's span as the
//! backend's parent. Each branch says how the edge answered ([`EdgeOutcome`]: forwarded,
//! replayed, held, refused, forward failed, edge error), and when the settings name a collector
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`) the span is exported after the answer.

use std::time::Duration;

use futures_channel::oneshot;
use shared::prefer::{PREFER_HEADER, requested_wait};
use shared::{Problem, ProblemKind};
use worker::{Env, Request, Response, Result, console_error, console_log, event};

use super::body::{discard_unread_body, read_body_within};
use super::clock::{millis, now_ms};
use super::coordinator_client::CoordinatorClient;
use super::forward::{BackendReply, forward_buffered, forward_unchanged};
use super::identity;
use super::rate_limiter_client::take_token;
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
use crate::trace::{EdgeOutcome, EdgeSpan, TraceContext};

/// The entry point: answers every request, turning an unexpected error into a 500 problem. A
/// body nothing read (the answer did not need it) is read to its end first, so the client,
/// still sending, gets the answer rather than a reset connection.
#[event(fetch)]
async fn fetch(request: Request, env: Env, context: worker::Context) -> Result<Response> {
    let answer = serve(&request, &env, &context).await;
    discard_unread_body(&request).await;
    answer
}

/// An answer and how the edge came to it, for its span.
struct Answered {
    /// The span's `edge.outcome`: which branch answered.
    outcome: EdgeOutcome,
    /// What the client gets.
    response: Response,
}

impl Answered {
    /// An answer the edge makes itself.
    fn reply(outcome: EdgeOutcome, reply: Reply) -> Result<Answered> {
        let response = reply_response(reply)?;
        Ok(Answered { outcome, response })
    }

    /// A refusal the edge makes itself, before the backend.
    fn refused(reply: Reply) -> Result<Answered> {
        Answered::reply(EdgeOutcome::Refused, reply)
    }
}

/// Reads the settings and serves the request as the edge's span of its trace, exported after
/// the answer when a collector is configured.
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
    let answered = match handle(request, &config, &trace, env, context).await {
        Ok(answered) => answered,
        Err(error) => {
            console_error!("edge error: {error}");
            Answered::reply(EdgeOutcome::EdgeError, Reply::problem(&internal_problem()))?
        }
    };
    if let Some(export) = config.span_export() {
        let (method, path) = (request.method().to_string(), request.path());
        let span = EdgeSpan {
            trace: &trace,
            method: &method,
            path: &path,
            status: answered.response.status_code(),
            outcome: answered.outcome,
            start_ms,
            end_ms: now_ms(),
        };
        export_span(context, export, &span);
    }
    Ok(answered.response)
}

/// Passes the request through or guards it.
async fn handle(
    request: &Request,
    config: &EdgeConfig,
    trace: &TraceContext,
    env: &Env,
    context: &worker::Context,
) -> Result<Answered> {
    let path = request.path();
    if is_operator_route(&path) {
        return Answered::refused(Reply::problem(&operator_routes::not_found()));
    }
    let limits = config.rate_limits();
    let address =
        ClientAddress::from_header(request.headers().get(CLIENT_ADDRESS_HEADER)?.as_deref());
    if let Some(limited) = over_limit(env, Requester::Address(address), limits.per_address).await {
        return Answered::refused(limited);
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
                    return Answered::refused(Reply::problem(&too_large));
                }
                BodyRead::Unreadable => {
                    return Answered::refused(Reply::problem(&Problem::body_unreadable()));
                }
            },
        };
        let request_id = new_request_id();
        let forwarded =
            forward_unchanged(request, body.as_deref(), config, &request_id, trace).await;
        return match forwarded {
            Ok(response) => Ok(Answered {
                outcome: EdgeOutcome::Forwarded,
                response,
            }),
            Err(failure) => failure_answer(failure, config),
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
            Answered::refused(Reply::problem(&Problem::from(&reason)))
        }
        Verdict::Reject(problem) => Answered::refused(Reply::problem(&problem)),
        Verdict::Coordinate { attempt, body } => {
            let user = Requester::User(attempt.user);
            if let Some(limited) = over_limit(env, user, limits.per_user).await {
                return Answered::refused(limited);
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
        Ok(outcome) => outcome.edge_reply(),
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
) -> Result<Answered> {
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
        Ok(outcome) => {
            if let Some(reply) = outcome.edge_reply(wait) {
                return Answered::reply(EdgeOutcome::of_key_object(&outcome), reply);
            }
        }
        Err(error) => {
            // The backend stays the authority: without the object it still does the work once.
            console_error!("key coordinator unavailable, forwarding uncoordinated: {error}");
            let forwarded = forward_buffered(request, &body, config, &request_id, trace).await;
            return forwarded_answer(forwarded, config);
        }
    }
    // The forward and the report to the object run as a `wait_until` task: a phone that times
    // out and disconnects must not cancel them, or its key would stay marked in flight until the
    // alarm instead of holding the finished answer for the phone's next retry.
    let (answered, answer) = oneshot::channel();
    let outgoing = request.clone()?;
    let task_config = config.clone();
    let task_trace = trace.clone();
    let fingerprint = attempt.fingerprint;
    context.wait_until(async move {
        let forwarded =
            forward_buffered(&outgoing, &body, &task_config, &request_id, &task_trace).await;
        let answer = match &forwarded {
            Ok(answer) => answer.saved_answer(),
            Err(failure) => {
                let problem = failure.problem(task_config.backend_timeout());
                Some(Reply::problem(&problem).to_saved_answer())
            }
        };
        let report = FinishReport {
            attempt_id: request_id,
            fingerprint,
            answer,
        };
        if let Err(error) = coordinator.finish(&report).await {
            console_error!(
                "could not report to the key coordinator; its mark lapses by alarm: {error}"
            );
        }
        // The phone may be gone; then nobody is waiting for the answer, and that is fine.
        let _ = answered.send(forwarded);
    });
    match answer.await {
        Ok(forwarded) => forwarded_answer(forwarded, config),
        Err(_) => Answered::reply(EdgeOutcome::EdgeError, Reply::problem(&internal_problem())),
    }
}

/// The backend's answer, or the problem for a failed forward.
fn forwarded_answer(
    forwarded: std::result::Result<BackendReply, ForwardFailure>,
    config: &EdgeConfig,
) -> Result<Answered> {
    match forwarded {
        Ok(answer) => Ok(Answered {
            outcome: EdgeOutcome::Forwarded,
            response: answer.into_response(),
        }),
        Err(failure) => failure_answer(failure, config),
    }
}

/// The problem for a forward that got no answer from the backend.
fn failure_answer(failure: ForwardFailure, config: &EdgeConfig) -> Result<Answered> {
    let problem = failure.problem(config.backend_timeout());
    Answered::reply(EdgeOutcome::from(failure), Reply::problem(&problem))
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
