//! Every reply of the simulator that is not an outcome, as one error type.
//!
//! Handlers return `Result<_, SimulatorError>`; the conversion to a response is the only place
//! that picks status codes and [`ErrorBody`]s for failures, so a malformed request is always a
//! JSON 4xx and never a panic or an empty body.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bank_api::{ErrorBody, ErrorStatus, KnobsError, RequestError, UnknownReference};

use crate::status_checks::Refusal;

/// Why a request got no outcome.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SimulatorError {
    /// The body is not JSON, lacks a field, has a wrong type, or is not labelled JSON.
    #[error(transparent)]
    UnreadableBody(#[from] JsonRejection),
    /// The body parsed but a value is refused (an empty reference, a zero amount): the
    /// refusal, and the call's reference if it has one.
    #[error("{0}")]
    InvalidRequest(RequestError, Option<String>),
    /// `PUT /knobs` with a rate outside `0..=1`.
    #[error(transparent)]
    InvalidKnobs(#[from] KnobsError),
    /// A look-up of a reference the bank never saw.
    #[error("the bank never saw reference {0}")]
    UnknownReference(String),
    /// A look-up the rail's rules forbid (the simulator's `status_check_*` knobs).
    #[error("{}", .1.message())]
    StatusCheckRefused(String, Refusal),
    /// No such route.
    #[error("no such route")]
    NoSuchRoute,
    /// `error_rate` fired: replied before anything was done, naming the call's reference.
    #[error("simulated bank failure (error_rate); nothing was done")]
    SimulatedFailure(String),
    /// A money-moving call under a reference already decided, refused (`refuse_repeats`).
    #[error("reference {0} was already decided; nothing more was done")]
    DuplicateReference(String),
}

impl IntoResponse for SimulatorError {
    fn into_response(self) -> Response {
        let (status_code, status, reference, message) = match &self {
            Self::UnknownReference(reference) => {
                let body = UnknownReference {
                    reference: reference.clone(),
                };
                return (StatusCode::NOT_FOUND, Json(body)).into_response();
            }
            Self::UnreadableBody(rejection) => (
                rejection.status(),
                ErrorStatus::InvalidRequest,
                None,
                Some(rejection.body_text()),
            ),
            Self::InvalidRequest(_, reference) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorStatus::InvalidRequest,
                reference.clone(),
                Some(self.to_string()),
            ),
            Self::InvalidKnobs(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorStatus::InvalidRequest,
                None,
                Some(self.to_string()),
            ),
            Self::StatusCheckRefused(reference, _) => (
                StatusCode::TOO_MANY_REQUESTS,
                ErrorStatus::StatusCheckRefused,
                Some(reference.clone()),
                Some(self.to_string()),
            ),
            Self::NoSuchRoute => (StatusCode::NOT_FOUND, ErrorStatus::NotFound, None, None),
            Self::DuplicateReference(reference) => (
                StatusCode::CONFLICT,
                ErrorStatus::DuplicateReference,
                Some(reference.clone()),
                Some(self.to_string()),
            ),
            Self::SimulatedFailure(reference) => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorStatus::Error,
                Some(reference.clone()),
                Some(self.to_string()),
            ),
        };
        let body = ErrorBody {
            status,
            reference,
            message,
        };
        (status_code, Json(body)).into_response()
    }
}
