//! The night as one SVG picture (`--chart PATH`), drawn with `plotters`. The top panel is the
//! bank's latency over the night (its ramp, and the band its jitter adds) against the phones'
//! timeout; below it, one panel per client with its attempts and the bank's debits counted up
//! over the night, each double debit (a customer's second or later debit) a red cross on the
//! debits line at the moment the bank made it, and the client's totals in the panel's title.
//!
//! Every panel shares the night's time axis, in minutes of the night from when the run's phones
//! were made (a moment before the first customer's timer starts), and a dashed line where the
//! bank's latency reaches the timeout, so a reader can look down from there to what each client
//! did. Attempts are timed by the phones, debits by the bank's ledger, both put on the run's
//! night by its [`ScaledClock`].
//!
//! Text is left to the viewer's fonts: `plotters` is built without a font library, so it places
//! text from a rough estimate of its width and writes it as SVG `<text>`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use bank_api::LedgerEntry;
use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::night::Night;
use crate::phones::{ClientKind, PhoneResult};
use crate::scaled_clock::ScaledClock;

/// The whole picture's width, in pixels.
const WIDTH: u32 = 1200;
/// The height of the heading above the panels.
const HEADING_HEIGHT: u32 = 50;
/// The latency panel's height.
const LATENCY_HEIGHT: u32 = 330;
/// Each client panel's height.
const CLIENT_HEIGHT: u32 = 270;
/// Room for the y axis's labels and description, the same in every panel so the time axes line up.
const Y_LABEL_AREA: u32 = 70;
/// Room for the x axis's labels (and, on the last panel, its description).
const X_LABEL_AREA: u32 = 30;
const LAST_X_LABEL_AREA: u32 = 55;
/// The double-debit crosses' half-width, in pixels.
const CROSS_SIZE: u32 = 4;
/// Headroom above the highest value of a panel.
const HEADROOM: f64 = 1.12;

const FONT: &str = "sans-serif";
const LATENCY_BLUE: RGBColor = RGBColor(31, 119, 180);
const TIMEOUT_ORANGE: RGBColor = RGBColor(230, 120, 0);
const ATTEMPTS_PURPLE: RGBColor = RGBColor(117, 80, 180);
const DEBITS_GREEN: RGBColor = RGBColor(44, 140, 44);
/// The double-debit crosses, and nothing else on the chart: `#D62728` in the SVG.
const DOUBLE_DEBIT_RED: RGBColor = RGBColor(214, 39, 40);
const GUIDE_GREY: RGBColor = RGBColor(120, 120, 120);

/// The picture's drawing area.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A panel: time of the night in minutes across, a value up.
type Panel<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One client's run on the night's clock.
#[derive(Debug)]
pub struct ClientRun {
    /// The client, as the table labels it.
    pub label: &'static str,
    /// When each payment attempt was sent.
    pub attempts: Vec<Duration>,
    /// When the bank debited each customer: one list per customer.
    pub debits_by_customer: Vec<Vec<Duration>>,
}

impl ClientRun {
    /// `kind`'s run: its phones' attempts, and the bank's debits of their accounts placed on
    /// the run's night by `clock`.
    pub fn from_replay(
        kind: ClientKind,
        results: &[PhoneResult],
        debits_by_account: &BTreeMap<String, Vec<LedgerEntry>>,
        clock: &ScaledClock,
    ) -> ClientRun {
        ClientRun {
            label: kind.label(),
            attempts: results
                .iter()
                .flat_map(|result| result.sent_at.iter().copied())
                .collect(),
            debits_by_customer: debits_by_account
                .values()
                .map(|debits| debits.iter().map(|d| clock.elapsed_at(d.at)).collect())
                .collect(),
        }
    }

    /// The panel's title: the client and its totals.
    fn title(&self) -> String {
        let debits: usize = self.debits_by_customer.iter().map(Vec::len).sum();
        let charged_twice = self
            .debits_by_customer
            .iter()
            .filter(|debits| debits.len() > 1)
            .count();
        let customers = match charged_twice {
            1 => "customer",
            _ => "customers",
        };
        format!(
            "{}: {} attempts, {debits} debits, {charged_twice} {customers} charged twice",
            self.label,
            self.attempts.len()
        )
    }

    /// Every debit in the order the bank made them, in minutes of the night, each marked `true` when it was
    /// a repeat: its customer's second or later.
    fn debits_in_order(&self) -> Vec<(f64, bool)> {
        let mut debits: Vec<(f64, bool)> = self
            .debits_by_customer
            .iter()
            .flat_map(|times| {
                let mut times = times.clone();
                times.sort();
                times
                    .into_iter()
                    .enumerate()
                    .map(|(nth, time)| (minutes(time), nth > 0))
            })
            .collect();
        debits.sort_by(|a, b| a.0.total_cmp(&b.0));
        debits
    }

    /// The last thing that happened in the run.
    fn last_event(&self) -> Duration {
        self.attempts
            .iter()
            .chain(self.debits_by_customer.iter().flatten())
            .copied()
            .max()
            .unwrap_or_default()
    }
}

/// What the chart shows: the night and each client's run of it.
#[derive(Debug)]
pub struct NightChart<'a> {
    /// The night every client replayed.
    pub night: &'a Night,
    /// The phones' timeout per attempt.
    pub timeout: Duration,
    /// The clients' runs, in the table's order.
    pub runs: &'a [ClientRun],
}

impl NightChart<'_> {
    /// Writes the chart to `path` as SVG, making its folder if needed.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(folder) = path
            .parent()
            .filter(|folder| !folder.as_os_str().is_empty())
        {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("making {}", folder.display()))?;
        }
        std::fs::write(path, self.to_svg()?)
            .with_context(|| format!("writing the chart to {}", path.display()))
    }

    /// The chart as SVG text.
    pub fn to_svg(&self) -> anyhow::Result<String> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, self.size()).into_drawing_area();
            root.fill(&WHITE)?;
            let (heading, panels) = root.split_vertically(HEADING_HEIGHT);
            heading.titled(&self.heading(), (FONT, 26))?;
            let (latency, clients) = panels.split_vertically(LATENCY_HEIGHT);
            self.draw_latency(&latency)?;
            let client_areas = clients.split_evenly((self.runs.len().max(1), 1));
            for (nth, (area, run)) in client_areas.iter().zip(self.runs).enumerate() {
                let last = nth + 1 == self.runs.len();
                self.draw_client(area, run, last.then_some("minutes of the night"))?;
            }
            root.present()?;
        }
        Ok(svg)
    }

    fn size(&self) -> (u32, u32) {
        let clients = u32::try_from(self.runs.len()).unwrap_or(u32::MAX);
        (
            WIDTH,
            HEADING_HEIGHT + LATENCY_HEIGHT + CLIENT_HEIGHT.saturating_mul(clients),
        )
    }

    fn heading(&self) -> String {
        let settings = &self.night.settings;
        format!(
            "The bill-payments night, replayed: {} customers, seed {}, for each kind of client",
            settings.customers, settings.seed
        )
    }

    /// The time axis's end, in minutes: past the evening and the last event of every run.
    fn end_minutes(&self) -> f64 {
        let last = self
            .runs
            .iter()
            .map(ClientRun::last_event)
            .chain([self.night.settings.evening])
            .max()
            .unwrap_or_default();
        minutes(last) * 1.03
    }

    /// When the bank's latency (before jitter) first reaches the phones' timeout, if it does.
    fn latency_reaches_timeout(&self) -> Option<f64> {
        self.night
            .ramp
            .iter()
            .find(|step| step.latency >= self.timeout)
            .map(|step| minutes(step.at))
    }

    /// The top panel: the latency's steps and jitter band, the timeout line.
    fn draw_latency(&self, area: &Area) -> anyhow::Result<()> {
        let end = self.end_minutes();
        let jitter = self.night.settings.jitter.as_secs_f64();
        let timeout = self.timeout.as_secs_f64();
        let latency = self.latency_steps(end);
        let peak = latency
            .iter()
            .map(|&(_, seconds)| seconds + jitter)
            .fold(timeout, f64::max);
        let top = peak * HEADROOM;
        let title = "The bank's latency against the phones' timeout";
        let mut panel = panel(area, title, end, top, X_LABEL_AREA)?;
        configure_mesh(&mut panel)
            .y_desc("seconds of the night")
            .draw()?;
        let band_style = LATENCY_BLUE.mix(0.2).filled();
        panel
            .draw_series([Polygon::new(jitter_band(&latency, jitter), band_style)])?
            .label(format!("latency with jitter (+ up to {jitter} s)"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], band_style));
        panel
            .draw_series(LineSeries::new(latency, LATENCY_BLUE.stroke_width(3)))?
            .label("bank latency")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], LATENCY_BLUE.stroke_width(3)));
        draw_timeout(&mut panel, timeout, end)?;
        self.draw_timeout_reached(&mut panel, top)?;
        self.name_timeout_reached(&mut panel, top)?;
        draw_legend(&mut panel)
    }

    /// One client's panel: attempts and debits counted up, double debits crossed; `x_desc`
    /// describes the time axis (on the last panel).
    fn draw_client(
        &self,
        area: &Area,
        run: &ClientRun,
        x_desc: Option<&str>,
    ) -> anyhow::Result<()> {
        let end = self.end_minutes();
        let top = self.client_scale() * HEADROOM;
        let x_label_area = x_desc.map_or(X_LABEL_AREA, |_| LAST_X_LABEL_AREA);
        let mut panel = panel(area, &run.title(), end, top, x_label_area)?;
        let mut mesh = configure_mesh(&mut panel);
        mesh.y_desc("count so far");
        if let Some(desc) = x_desc {
            mesh.x_desc(desc);
        }
        mesh.draw()?;
        draw_customers(&mut panel, self.night.customers.len(), end)?;
        let attempts = sorted_minutes(&run.attempts);
        draw_count(&mut panel, &attempts, end, "attempts sent", ATTEMPTS_PURPLE)?;
        let debits = run.debits_in_order();
        let debit_times: Vec<f64> = debits.iter().map(|&(time, _)| time).collect();
        draw_count(&mut panel, &debit_times, end, "bank debits", DEBITS_GREEN)?;
        draw_double_debits(&mut panel, &debits)?;
        self.draw_timeout_reached(&mut panel, top)?;
        draw_legend(&mut panel)
    }

    /// The client panels' common height: the most attempts of any client, or the customers.
    fn client_scale(&self) -> f64 {
        self.runs
            .iter()
            .map(|run| run.attempts.len())
            .chain([self.night.customers.len(), 1])
            .max()
            .unwrap_or(1) as f64
    }

    /// The latency's steps over the night (before jitter), the last held to `end`, in seconds.
    fn latency_steps(&self, end: f64) -> Vec<(f64, f64)> {
        let ramp = &self.night.ramp;
        ramp.iter()
            .enumerate()
            .flat_map(|(nth, step)| {
                let until = ramp.get(nth + 1).map_or(end, |next| minutes(next.at));
                let latency = step.latency.as_secs_f64();
                [(minutes(step.at), latency), (until, latency)]
            })
            .collect()
    }

    /// A dashed upright line where the latency reaches the timeout.
    fn draw_timeout_reached(&self, panel: &mut Panel, top: f64) -> anyhow::Result<()> {
        if let Some(at) = self.latency_reaches_timeout() {
            let line = [(at, 0.0), (at, top)];
            panel.draw_series(DashedLineSeries::new(line, 6, 4, GUIDE_GREY.into()))?;
        }
        Ok(())
    }

    /// What the line where the latency reaches the timeout means, written beside it.
    fn name_timeout_reached(&self, panel: &mut Panel, top: f64) -> anyhow::Result<()> {
        if let Some(at) = self.latency_reaches_timeout() {
            let style = TextStyle::from((FONT, 15))
                .color(&GUIDE_GREY)
                .pos(Pos::new(HPos::Left, VPos::Top));
            let name = "latency reaches the timeout: from here every reply is too late";
            // Just right of the line and below the panel's top, in pixels.
            let beside_the_line = EmptyElement::at((at, top)) + Text::new(name, (6, 4), style);
            panel.draw_series([beside_the_line])?;
        }
        Ok(())
    }
}

/// A panel on `area` with `title`, the night's minutes `0..end` across and `0..top` up.
fn panel<'a, 'b>(
    area: &'a Area<'b>,
    title: &str,
    end: f64,
    top: f64,
    x_label_area: u32,
) -> anyhow::Result<Panel<'a, 'b>> {
    Ok(ChartBuilder::on(area)
        .caption(title, (FONT, 19))
        .margin(8)
        .margin_right(24)
        .x_label_area_size(x_label_area)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0.0..end, 0.0..top)?)
}

/// The mesh as every panel has it: no light lines, tick labels without needless decimals.
fn configure_mesh<'a, 'b, 'c>(
    panel: &'c mut Panel<'a, 'b>,
) -> MeshStyle<'a, 'c, RangedCoordf64, RangedCoordf64, SVGBackend<'b>> {
    let mut mesh = panel.configure_mesh();
    mesh.label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .light_line_style(WHITE.mix(0.0))
        .x_label_formatter(&tick)
        .y_label_formatter(&tick);
    mesh
}

/// A tick's label: at most two decimals, none when whole (`2`, `2.5`).
fn tick(value: &f64) -> String {
    format!("{}", (value * 100.0).round() / 100.0)
}

/// The phones' timeout: a line across the panel, labelled at its right end.
fn draw_timeout(panel: &mut Panel, timeout: f64, end: f64) -> anyhow::Result<()> {
    let line = [(0.0, timeout), (end, timeout)];
    panel.draw_series(LineSeries::new(line, TIMEOUT_ORANGE.stroke_width(2)))?;
    let style = TextStyle::from((FONT, 15))
        .color(&TIMEOUT_ORANGE)
        .pos(Pos::new(HPos::Right, VPos::Bottom));
    let label = format!("phone timeout {timeout} s");
    panel.draw_series([Text::new(label, (end * 0.99, timeout), style)])?;
    Ok(())
}

/// The number of customers: a dashed line across the panel.
fn draw_customers(panel: &mut Panel, customers: usize, end: f64) -> anyhow::Result<()> {
    let line = [(0.0, customers as f64), (end, customers as f64)];
    panel
        .draw_series(DashedLineSeries::new(line, 6, 4, GUIDE_GREY.into()))?
        .label(format!("customers ({customers}, one bill each)"))
        .legend(|(x, y)| DashedPathElement::new([(x, y), (x + 20, y)], 6, 4, GUIDE_GREY));
    Ok(())
}

/// A count of events at `sorted` times, going up over the night, in `colour`.
fn draw_count(
    panel: &mut Panel,
    sorted: &[f64],
    end: f64,
    label: &str,
    colour: RGBColor,
) -> anyhow::Result<()> {
    let style = colour.stroke_width(2);
    panel
        .draw_series(LineSeries::new(counted_up(sorted, end), style))?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
    Ok(())
}

fn draw_legend<'a, 'b: 'a>(panel: &mut Panel<'a, 'b>) -> anyhow::Result<()> {
    panel
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(GUIDE_GREY)
        .draw()?;
    Ok(())
}

/// The repeats among `debits` as red crosses on the debits line: at each one's time, at the
/// count of debits so far.
fn draw_double_debits(panel: &mut Panel, debits: &[(f64, bool)]) -> anyhow::Result<()> {
    let crosses: Vec<(f64, f64)> = (1..)
        .zip(debits)
        .filter(|(_, (_, repeat))| *repeat)
        .map(|(count, &(time, _))| (time, f64::from(count)))
        .collect();
    if crosses.is_empty() {
        return Ok(());
    }
    let style = DOUBLE_DEBIT_RED.stroke_width(2);
    panel
        .draw_series(PointSeries::of_element(
            crosses,
            CROSS_SIZE,
            style,
            &|at, size, style| Cross::new(at, size, style),
        ))?
        .label("double debit (a customer debited again)")
        .legend(move |at| Cross::new(at, CROSS_SIZE, style));
    Ok(())
}

/// The jitter band: from the latency up to the latency plus `jitter`, as a closed outline.
fn jitter_band(latency: &[(f64, f64)], jitter: f64) -> Vec<(f64, f64)> {
    latency
        .iter()
        .map(|&(at, seconds)| (at, seconds + jitter))
        .chain(latency.iter().rev().copied())
        .collect()
}

/// A count going up by one at each of `sorted` times, as steps from 0 at time 0 to `end`.
fn counted_up(sorted: &[f64], end: f64) -> Vec<(f64, f64)> {
    let steps = (0..)
        .zip(sorted)
        .flat_map(|(before, &time)| [(time, f64::from(before)), (time, f64::from(before + 1))]);
    let total = sorted.len() as f64;
    [(0.0, 0.0)]
        .into_iter()
        .chain(steps)
        .chain([(end, total)])
        .collect()
}

fn sorted_minutes(times: &[Duration]) -> Vec<f64> {
    let mut sorted: Vec<f64> = times.iter().copied().map(minutes).collect();
    sorted.sort_by(f64::total_cmp);
    sorted
}

fn minutes(time: Duration) -> f64 {
    time.as_secs_f64() / 60.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::night::NightSettings;

    fn night() -> Night {
        Night::draw(NightSettings {
            customers: 3,
            evening: Duration::from_secs(120),
            latency_from: Duration::from_secs(1),
            latency_to: Duration::from_secs(20),
            jitter: Duration::from_secs(4),
            ramp_steps: 4,
            lost_reply_rate: 0.0,
            lost_reply_delay: Duration::from_secs(60),
            decline_rate: 0.0,
            error_rate: 0.0,
            seed: 7,
        })
    }

    fn secs(seconds: &[u64]) -> Vec<Duration> {
        seconds.iter().copied().map(Duration::from_secs).collect()
    }

    /// The SVG between one panel's title and the next's (or the end).
    fn panel_of<'a>(svg: &'a str, title: &str, next_title: Option<&str>) -> &'a str {
        let start = svg.find(title).expect("the panel's title is drawn");
        let end = next_title.map_or(svg.len(), |next| svg.find(next).expect("the next title"));
        &svg[start..end]
    }

    #[test]
    fn each_client_gets_a_titled_panel_and_only_repeats_are_crossed() {
        let runs = [
            ClientRun {
                label: "(b) new key per retry",
                attempts: secs(&[10, 30, 31, 70, 100]),
                debits_by_customer: vec![secs(&[45, 20]), secs(&[72]), vec![]],
            },
            ClientRun {
                label: "(c) one key (library), no wait",
                attempts: secs(&[10, 30, 70]),
                debits_by_customer: vec![secs(&[20]), secs(&[72]), vec![]],
            },
        ];
        let night = night();
        let chart = NightChart {
            night: &night,
            timeout: Duration::from_secs(15),
            runs: &runs,
        };
        let svg = chart.to_svg().expect("the chart renders");

        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("phone timeout 15 s"));
        let new_key_title = "(b) new key per retry: 5 attempts, 3 debits, 1 customer charged twice";
        let library_title =
            "(c) one key (library), no wait: 3 attempts, 2 debits, 0 customers charged twice";
        let red = r##"stroke="#D62728""##;
        let new_key = panel_of(&svg, new_key_title, Some(library_title));
        assert!(new_key.contains(red), "(b)'s double debit is crossed");
        assert!(new_key.contains("double debit"), "and named in its legend");
        let library = panel_of(&svg, library_title, None);
        assert!(!library.contains(red), "(c) has no double debit to cross");
    }

    #[test]
    fn counts_go_up_in_steps_and_the_latency_holds_its_last_step() {
        assert_eq!(
            counted_up(&[1.0, 2.0], 3.0),
            [
                (0.0, 0.0),
                (1.0, 0.0),
                (1.0, 1.0),
                (2.0, 1.0),
                (2.0, 2.0),
                (3.0, 2.0)
            ]
        );
        let night = night();
        let chart = NightChart {
            night: &night,
            timeout: Duration::from_secs(15),
            runs: &[],
        };
        let steps = chart.latency_steps(5.0);
        assert_eq!(steps.first(), Some(&(0.0, 1.0)));
        assert_eq!(steps.last(), Some(&(5.0, 20.0)));
        assert_eq!(chart.latency_reaches_timeout(), Some(1.5));
    }
}
