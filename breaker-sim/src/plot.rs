//! SVG charts drawn with `plotters`: per policy a timeline (the breaker's state as colored
//! bands over the trace's phases, and the calls per time bucket split into succeeded, failed
//! and rejected), and for a sweep a scatter of every point with its Pareto front.
//!
//! The demo draws its chart with the same [`timeline_svg`].

use crate::report::{Report, Timeline};
use breaker_core::breaker::State;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const OK: RGBColor = RGBColor(0x43, 0xa0, 0x47);
const FAILED: RGBColor = RGBColor(0xe5, 0x39, 0x35);
const REJECTED: RGBColor = RGBColor(0x9e, 0x9e, 0x9e);
const CANCELLED: RGBColor = RGBColor(0x64, 0xb5, 0xf6);
const HALF_OPEN: RGBColor = RGBColor(0xfb, 0xc0, 0x2d);
const PHASE_A: RGBColor = RGBColor(0xee, 0xee, 0xee);
const PHASE_B: RGBColor = RGBColor(0xf8, 0xf8, 0xf8);
const INK: RGBColor = RGBColor(0x33, 0x33, 0x33);

fn state_color(s: State) -> RGBColor {
    match s {
        State::Closed | State::ForcedClosed => OK,
        State::Open | State::ForcedOpen => FAILED,
        State::HalfOpen => HALF_OPEN,
    }
}

/// One row of a timeline chart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Panel {
    /// Its label (a policy's name, a client set).
    pub label: String,
    /// `(when, state entered)`, nanoseconds, in order; `None` for calls without a breaker.
    pub states: Option<Vec<(u64, State)>>,
    /// Per bucket: calls that succeeded, failed, were rejected, were cancelled.
    pub buckets: Vec<[u32; 4]>,
    /// Bucket length, nanoseconds.
    pub bucket_ns: u64,
}

/// A timeline chart: phases across the top, one [`Panel`] per row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chart {
    /// The title.
    pub title: String,
    /// The time axis runs from 0 to this, nanoseconds.
    pub end_ns: u64,
    /// `(name, start)` of each phase, nanoseconds, in order.
    pub phases: Vec<(String, u64)>,
    /// The rows.
    pub panels: Vec<Panel>,
}

impl Chart {
    /// The chart of replayed policies: one panel per report that kept its timeline.
    pub fn from_reports(title: impl Into<String>, reports: &[Report]) -> Chart {
        let timelines: Vec<(&Report, &Timeline)> = reports
            .iter()
            .filter_map(|r| r.timeline.as_ref().map(|t| (r, t)))
            .collect();
        let end_ns = timelines.iter().map(|(_, t)| t.end_ns).max().unwrap_or(0);
        let phases = timelines
            .first()
            .map(|(_, t)| {
                t.phases
                    .iter()
                    .map(|p| (p.name.clone(), p.start_ns))
                    .collect()
            })
            .unwrap_or_default();
        Chart {
            title: title.into(),
            end_ns,
            phases,
            panels: timelines
                .iter()
                .map(|(r, t)| Panel {
                    label: r.policy.clone(),
                    states: Some(t.transitions.clone()),
                    buckets: t.buckets.clone(),
                    bucket_ns: t.bucket_ns,
                })
                .collect(),
        }
    }
}

const WIDTH: u32 = 1000;
const HEADER: u32 = 70;
const PANEL: u32 = 190;
const LEFT: u32 = 70;
const RIGHT: u32 = 20;

/// Draws `chart` as SVG text.
pub fn timeline_svg(chart: &Chart) -> String {
    let height = HEADER + PANEL * chart.panels.len().max(1) as u32 + 30;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        draw_timeline(&root, chart).expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    svg.push('\n');
    svg
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn draw_timeline(root: &Area<'_>, chart: &Chart) -> DrawResult {
    root.fill(&WHITE)?;
    let end_s = (chart.end_ns as f64 / 1e9).max(1e-3);
    let plot_w = f64::from(WIDTH - LEFT - RIGHT);
    let x = |t_ns: u64| (f64::from(LEFT) + plot_w * (t_ns as f64 / 1e9 / end_s).min(1.0)) as i32;
    let height = root.dim_in_pixel().1 as i32;
    root.draw(&Text::new(
        chart.title.clone(),
        (10, 8),
        ("sans-serif", 17)
            .into_font()
            .style(FontStyle::Bold)
            .color(&INK),
    ))?;
    // Legend.
    let legend = [
        (OK, "succeeded / closed"),
        (FAILED, "failed / open"),
        (REJECTED, "rejected locally"),
        (HALF_OPEN, "half-open"),
        (CANCELLED, "cancelled"),
    ];
    for (i, (color, label)) in legend.iter().enumerate() {
        let lx = LEFT as i32 + i as i32 * 170;
        root.draw(&Rectangle::new([(lx, 34), (lx + 12, 46)], color.filled()))?;
        root.draw(&Text::new(
            *label,
            (lx + 16, 34),
            ("sans-serif", 12).into_font().color(&INK),
        ))?;
    }
    // Phases, across every panel.
    let top = HEADER as i32 - 14;
    for (i, (name, start)) in chart.phases.iter().enumerate() {
        let stop = chart.phases.get(i + 1).map_or(chart.end_ns, |p| p.1);
        let (a, b) = (x(*start), x(stop).max(x(*start) + 1));
        let fill = if i % 2 == 0 { PHASE_A } else { PHASE_B };
        root.draw(&Rectangle::new([(a, top), (b, height - 30)], fill.filled()))?;
        root.draw(&Text::new(
            name.clone(),
            ((a + b) / 2, top + 2),
            ("sans-serif", 12)
                .into_font()
                .color(&INK)
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    for (p, panel) in chart.panels.iter().enumerate() {
        let y0 = (HEADER + PANEL * p as u32) as i32 + 8;
        root.draw(&Text::new(
            panel.label.clone(),
            (LEFT as i32, y0),
            ("sans-serif", 13)
                .into_font()
                .style(FontStyle::Bold)
                .color(&INK),
        ))?;
        let band = y0 + 18;
        if let Some(states) = &panel.states {
            root.draw(&Text::new(
                "state",
                (10, band + 3),
                ("sans-serif", 11).into_font().color(&INK),
            ))?;
            for w in states.windows(2) {
                let (a, b) = (x(w[0].0), x(w[1].0).max(x(w[0].0) + 1));
                root.draw(&Rectangle::new(
                    [(a, band), (b, band + 16)],
                    state_color(w[0].1).filled(),
                ))?;
            }
        }
        // Stacked bars of calls per bucket.
        let (bars_top, bars_bottom) = (band + 24, y0 + PANEL as i32 - 14);
        let max = panel
            .buckets
            .iter()
            .map(|b| b.iter().sum::<u32>())
            .max()
            .unwrap_or(0)
            .max(1);
        let h = f64::from(bars_bottom - bars_top);
        root.draw(&Text::new(
            format!("calls per {}", fmt_secs(panel.bucket_ns)),
            (10, bars_top),
            ("sans-serif", 11).into_font().color(&INK),
        ))?;
        root.draw(&Text::new(
            format!("max {max}"),
            (10, bars_top + 14),
            ("sans-serif", 11).into_font().color(&REJECTED),
        ))?;
        for (i, b) in panel.buckets.iter().enumerate() {
            let start = i as u64 * panel.bucket_ns;
            let (a, z) = (x(start), x(start + panel.bucket_ns));
            let mut y = f64::from(bars_bottom);
            for (k, color) in [OK, FAILED, REJECTED, CANCELLED].iter().enumerate() {
                if b[k] == 0 {
                    continue;
                }
                let bh = h * f64::from(b[k]) / f64::from(max);
                root.draw(&Rectangle::new(
                    [
                        (a, (y - bh).round() as i32),
                        ((z - 1).max(a + 1), y.round() as i32),
                    ],
                    color.filled(),
                ))?;
                y -= bh;
            }
        }
        root.draw(&PathElement::new(
            vec![
                (LEFT as i32, bars_bottom),
                ((WIDTH - RIGHT) as i32, bars_bottom),
            ],
            INK,
        ))?;
    }
    // Time axis.
    let axis_y = height - 24;
    let step = nice_step(end_s);
    let mut t = 0.0;
    while t <= end_s + 1e-9 {
        let px = x((t * 1e9) as u64);
        root.draw(&Text::new(
            format!("{}s", trim(t)),
            (px, axis_y),
            ("sans-serif", 11)
                .into_font()
                .color(&INK)
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
        t += step;
    }
    Ok(())
}

fn fmt_secs(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 1.0 {
        format!("{}ms", trim(s * 1e3))
    } else {
        format!("{}s", trim(s))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map_or(s.clone(), str::to_owned)
}

/// A step for about 10 ticks: 1, 2 or 5 times a power of ten.
fn nice_step(span: f64) -> f64 {
    let raw = span / 10.0;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

/// The scatter of a ranked sweep (see [`crate::sweep::rank`]): `failures_reached` across,
/// `successes_refused` up; the Pareto front in red, joined, labelled with its ranks.
pub fn sweep_svg(title: &str, reports: &[Report]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 600)).into_drawing_area();
        draw_sweep(&root, title, reports).expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    svg.push('\n');
    svg
}

fn draw_sweep(root: &Area<'_>, title: &str, reports: &[Report]) -> DrawResult {
    root.fill(&WHITE)?;
    let fx = reports
        .iter()
        .map(|r| r.failures_reached)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let fy = reports
        .iter()
        .map(|r| r.successes_refused)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 17).into_font().style(FontStyle::Bold))
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..fx * 1.05, 0f64..fy * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("failures_reached (failed attempts that reached the dependency)")
        .y_desc("successes_refused (successful calls refused by any layer)")
        .label_style(("sans-serif", 12))
        .draw()?;
    let point = |r: &Report| (r.failures_reached as f64, r.successes_refused as f64);
    chart.draw_series(
        reports
            .iter()
            .filter(|r| r.pareto != Some(true))
            .map(|r| Circle::new(point(r), 3, REJECTED.filled())),
    )?;
    let mut front: Vec<&Report> = reports.iter().filter(|r| r.pareto == Some(true)).collect();
    front.sort_by_key(|r| (r.failures_reached, r.successes_refused));
    chart.draw_series(std::iter::once(PathElement::new(
        front.iter().map(|r| point(r)).collect::<Vec<_>>(),
        FAILED.stroke_width(2),
    )))?;
    chart.draw_series(
        front
            .iter()
            .map(|r| Circle::new(point(r), 5, FAILED.filled())),
    )?;
    chart.draw_series(front.iter().map(|r| {
        Text::new(
            format!("#{}", r.rank.unwrap_or(0)),
            point(r),
            ("sans-serif", 11).into_font().color(&INK),
        )
    }))?;
    Ok(())
}

/// An HTML page with `svgs` inline and the table text, for `--html`.
pub fn html_page(title: &str, table: &str, svgs: &[String]) -> String {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut out = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title></head>\n\
         <body style=\"font-family: sans-serif\">\n<h1>{t}</h1>\n<pre>{}</pre>\n",
        escape(table),
        t = escape(title)
    );
    for svg in svgs {
        out.push_str("<div>");
        out.push_str(svg.trim_start_matches(|c| c != '<'));
        out.push_str("</div>\n");
    }
    out.push_str("</body></html>\n");
    out
}
