// The tests' Workers Analytics Engine dataset, bound to the Worker under workerd as a wrapped
// binding (tests/harness/src/workerd.rs): workerd offers the real binding only behind its
// --experimental flag, and `wrangler dev`'s does nothing. Each point written becomes one line on
// workerd's standard output, which a test reads (`workerd::dataset_points`).
export default function dataset(env) {
  return {
    writeDataPoint(point) {
      console.log(JSON.stringify({ analytics_engine_dataset: env.dataset, point }));
    },
  };
}
