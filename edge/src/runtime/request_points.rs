//! Writes each request's data point ([`RequestPoint`]) to the edge's Workers Analytics Engine
//! dataset, when the Worker has that binding; a deployment without it writes nothing.
//! `writeDataPoint` returns at once and the platform sends the point after the reply, so
//! counting never delays or changes a reply; a failed write is only logged.

use worker::{AnalyticsEngineDataPointBuilder, Env, console_error};

use crate::trace::{REQUESTS_DATASET_BINDING, RequestPoint};

/// Writes `point` to the dataset bound as [`REQUESTS_DATASET_BINDING`], if there is one.
pub fn write_request_point(env: &Env, point: RequestPoint) {
    let Ok(dataset) = env.analytics_engine(REQUESTS_DATASET_BINDING) else {
        return;
    };
    let data_point = AnalyticsEngineDataPointBuilder::new()
        .indexes([point.index])
        .blobs(point.blobs)
        .build();
    if let Err(error) = dataset.write_data_point(&data_point) {
        console_error!("could not count the request in {REQUESTS_DATASET_BINDING}: {error}");
    }
}
