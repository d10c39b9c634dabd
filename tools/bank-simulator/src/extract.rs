//! A JSON body extractor whose rejection is a [`SimulatorError`], so unreadable bodies are
//! replied in the simulator's own [`bank_api::ErrorBody`] format rather than as
//! axum's plain text.

use axum::Json;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::SimulatorError;

/// The request body, parsed as JSON into `T`.
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = SimulatorError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<T>::from_request(request, state).await?;
        Ok(Self(value))
    }
}
