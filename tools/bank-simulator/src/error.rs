//! Every answer of the simulator that is not an outcome, as one error type.
//!
//! Handlers return `Result<_, SimulatorError>`; the conversion to a response is the only place
//! that picks status codes and [`ErrorBody`]s for failures, so a malformed request is always a
//! JSON 4xx and never a panic or an empty body.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bank_api::{ErrorBody, ErrorStatus, KnobsError, RequestError, UnknownReference};

/// Why a request got no outcome.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SimulatorError {
    /// The body is not JSON, lacks a field, has a wrong type, or is not labelled JSON.
    #[error(transparent)]
    UnreadableBody(#[from] JsonRejection),
    /// The body parsed but a value is refused (an empty reference, a zero amount).
    #[error(transparent)]
    InvalidRequest(#[from] RequestError),
    /// `PUT /knobs` with a rate outside `0..=1`.
    #[error(transparent)]
    InvalidKnobs(#[from] KnobsError),
    /// A look-up of a reference the bank never saw.
    #[error("the bank never saw reference {0}")]
    UnknownReference(String),
    /// No such route.
    #[error("no such route")]
    NoSuchRoute,
    /// `error_rate` fired: answered before anything was done.
    #[error("simulated bank failure (error_rate); nothing was done")]
    SimulatedFailure,
}

impl IntoResponse for SimulatorError {
    fn into_response(self) -> Response {
        let (status_code, status, message) = match &self {
            Self::UnknownReference(reference) => {
                let body = UnknownReference {
                    reference: reference.clone(),
                };
                return (StatusCode::NOT_FOUND, Json(body)).into_response();
            }
            Self::UnreadableBody(rejection) => (
                rejection.status(),
                ErrorStatus::InvalidRequest,
                Some(rejection.body_text()),
            ),
            Self::InvalidRequest(_) | Self::InvalidKnobs(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorStatus::InvalidRequest,
                Some(self.to_string()),
            ),
            Self::NoSuchRoute => (StatusCode::NOT_FOUND, ErrorStatus::NotFound, None),
            Self::SimulatedFailure => (
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorStatus::Error,
                Some(self.to_string()),
            ),
        };
        (status_code, Json(ErrorBody { status, message })).into_response()
    }
}
