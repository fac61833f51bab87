// The jobs view: the tenant's jobs with live progress (SSE over fetch), fps and ETA, cancel,
// and the result (before/after slider for images, a player for videos) with download.

import { ApiError, api, apiBlob, streamEvents } from "./api.js";
import { $, announce, flashMessage, formatBytes, formatSeconds, formatTime, h } from "./dom.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const jobs = new Map(); // id -> JobOut
const streams = new Map(); // id -> AbortController
const rates = new Map(); // id -> {t0, p0} for the ETA
// This tab's submissions: {sources: File[], target: File} (names in the list, the "before"
// image of the slider); their result opens by itself when the job succeeds.
const inputs = new Map();
const openWhenDone = new Set();
let openResult = null; // {id, url}

/** Keep the files of a job submitted from this tab; open its result when it succeeds. */
export function rememberInputs(jobId, sourceFiles, targetFile) {
  inputs.set(jobId, { sources: sourceFiles, target: targetFile });
  openWhenDone.add(jobId);
}

export async function showJobs() {
  const page = await api("/v1/jobs?limit=50");
  jobs.clear();
  for (const job of page.items) jobs.set(job.id, job);
  render();
  for (const job of page.items) if (!TERMINAL.has(job.status)) follow(job.id);
}

function follow(id) {
  if (streams.has(id)) return;
  const controller = new AbortController();
  streams.set(id, controller);
  streamEvents(`/v1/jobs/${id}/events`, (name, data) => {
    if (name === "status" && data) update(data);
  }, controller.signal)
    .catch((error) => {
      if (error.name !== "AbortError") flashMessage(error.message);
    })
    .finally(async () => {
      streams.delete(id);
      // The stream ends at a terminal status; read the final row (result metadata).
      if (!controller.signal.aborted) {
        try {
          update(await api(`/v1/jobs/${id}`));
        } catch (error) {
          if (!(error instanceof ApiError && error.status === 404)) flashMessage(error.message);
        }
      }
    });
}

function update(job) {
  const before = jobs.get(job.id);
  jobs.set(job.id, job);
  if (job.status === "running" && !rates.has(job.id)) {
    rates.set(job.id, { t0: performance.now(), p0: job.progress });
  }
  if (before && before.status !== job.status && TERMINAL.has(job.status)) {
    announce(`Job ${job.id.slice(0, 8)} ${job.status}.`);
  }
  const row = document.getElementById(`job-${job.id}`);
  if (row) row.replaceWith(jobRow(job));
  else render();
  if (job.status === "succeeded" && job.result && openWhenDone.delete(job.id)) showResult(job);
  else if (TERMINAL.has(job.status) && job.status !== "succeeded") openWhenDone.delete(job.id);
}

/** "face.jpg → group.jpg" and a thumbnail of the target, for a job submitted from this tab
 * (the server keeps no file names). */
function inputNames(job) {
  const files = inputs.get(job.id);
  if (!files) return null;
  const sources = files.sources.map((file) => file.name).join(", ");
  if (files.target.type.startsWith("image/") && !files.thumbnail) {
    files.thumbnail = URL.createObjectURL(files.target);
  }
  return h("div", { class: "job-inputs-row" },
    files.thumbnail ? h("img", { src: files.thumbnail, alt: "", class: "job-thumb" }) : null,
    h("p", { class: "small job-inputs" }, `${sources} → ${files.target.name}`));
}

/** Seconds left from the progress rate seen since the job started running here. */
function eta(job) {
  const rate = rates.get(job.id);
  if (!rate || job.status !== "running" || job.progress <= rate.p0) return null;
  const elapsed = (performance.now() - rate.t0) / 1000;
  const perSecond = (job.progress - rate.p0) / elapsed;
  return perSecond > 0 ? (1 - job.progress) / perSecond : null;
}

/** Frames per second: reported live by the server when it does, else from the result. */
function fps(job) {
  if (typeof job.fps === "number") return job.fps;
  const result = job.result;
  // An image is one frame: frames per second says nothing there.
  if (result && result.frames > 1 && result.compute_seconds) return result.frames / result.compute_seconds;
  return null;
}

/** The consent attestation recorded for each source of a job (what the job references). */
function consentLine(consent) {
  const items = consent.map((ref) =>
    `${ref.source}: attested by ${ref.attested_by}, statement ${ref.statement_version}, ` +
    `${formatTime(ref.attested_at)}`);
  return h("p", { class: "muted small job-consent" }, `Consent — ${items.join("; ")}`);
}

/** The quality report of each swapped face (docs/identity.md): verdict, distances, tone. */
function qualityList(quality) {
  const items = quality.map((face) => h("li", {
    class: `quality-face verdict-${face.verdict.replace(" ", "-")}`, "data-verdict": face.verdict,
  },
  h("span", { class: "badge" }, face.verdict),
  ` Face ${face.face + 1}: ${face.d_source.toFixed(2)} from the source, ` +
    `${face.d_target.toFixed(2)} from the original face` +
    (face.tone === null ? "" : `, tone ΔE ${face.tone.toFixed(1)}`) +
    `, yaw ${Math.round(face.yaw)}°` +
    (face.action === "untouched" ? " (left untouched)" : "")));
  return h("ul", { class: "muted small job-quality", "aria-label": "Swap quality" }, items);
}

function jobRow(job) {
  const percent = Math.round(job.progress * 100);
  const details = [job.stage && job.status === "running" ? job.stage : null];
  const speed = fps(job);
  if (speed) details.push(`${speed.toFixed(1)} fps`);
  const left = eta(job);
  if (left !== null) details.push(`ETA ${formatSeconds(left)}`);
  if (job.result) details.push(`${job.result.width}×${job.result.height}`, formatBytes(job.result.bytes));
  const actions = [];
  if (job.status === "succeeded") {
    actions.push(h("button", { type: "button", onclick: () => showResult(job) }, "View result"));
  }
  if (!TERMINAL.has(job.status)) {
    actions.push(h("button", {
      type: "button", class: "secondary", disabled: job.cancel_requested,
      onclick: () => cancel(job),
    }, job.cancel_requested ? "Cancelling…" : "Cancel"));
  }
  return h("li", { id: `job-${job.id}`, class: "job", "data-status": job.status },
    h("div", { class: "job-head" },
      h("code", { title: job.id }, job.id.slice(0, 8)),
      h("span", { class: `badge status-${job.status}` }, job.status),
      h("span", { class: "muted small" }, formatTime(job.created_at))),
    inputNames(job),
    h("div", { class: "job-progress" },
      h("progress", { max: 100, value: percent, "aria-label": `Progress of job ${job.id.slice(0, 8)}` }),
      h("span", { class: "percent" }, `${percent} %`)),
    h("div", { class: "muted small job-details" }, details.filter(Boolean).join(" · ")),
    job.error ? h("p", { class: "error-text" }, job.error.detail || job.error.type) : null,
    job.consent ? consentLine(job.consent) : null,
    job.result && job.result.quality ? qualityList(job.result.quality) : null,
    actions.length ? h("div", { class: "job-actions" }, actions) : null);
}

function render() {
  const list = $("#job-list");
  list.replaceChildren(...[...jobs.values()].map(jobRow));
  $("#jobs-empty").hidden = jobs.size > 0;
}

async function cancel(job) {
  try {
    update(await api(`/v1/jobs/${job.id}`, { method: "DELETE" }));
  } catch (error) {
    flashMessage(error.message);
  }
}

async function showResult(job) {
  const card = $("#result-card");
  const body = $("#result-body");
  card.hidden = false;
  body.replaceChildren(h("p", { class: "muted" }, "Loading the result…"));
  if (openResult) URL.revokeObjectURL(openResult.url);
  let blob;
  try {
    blob = await apiBlob(`/v1/jobs/${job.id}/result`);
  } catch (error) {
    body.replaceChildren(h("p", { class: "error-text", role: "alert" }, error.message));
    return;
  }
  const url = URL.createObjectURL(blob);
  openResult = { id: job.id, url };
  const extension = (blob.type.split("/")[1] || "bin").replace("jpeg", "jpg");
  const download = h("a", {
    class: "button", href: url, download: `${job.id}.${extension}`, id: "download-result",
  }, "Download");
  const viewer = blob.type.startsWith("video/")
    ? h("video", { src: url, controls: true, class: "result-media", "aria-label": "Result video" })
    : compareView(job, url);
  body.replaceChildren(viewer, h("div", { class: "job-actions" }, download,
    h("span", { class: "muted small" }, `${formatBytes(blob.size)} · ${blob.type}`)));
  card.scrollIntoView({ block: "nearest" });
  $("#result-title").focus();
}

/** A before/after slider when this tab still has the target; the result alone otherwise. */
function compareView(job, resultUrl) {
  const after = h("img", { src: resultUrl, alt: "Result", class: "result-media" });
  const target = inputs.get(job.id)?.target;
  if (!target) return after;
  const before = h("img", { src: URL.createObjectURL(target), alt: "Original target", class: "before" });
  const divider = h("div", { class: "divider", "aria-hidden": "true" });
  const frame = h("div", { class: "compare" }, after, before, divider);
  const slider = h("input", {
    type: "range", min: 0, max: 100, value: 50, id: "compare-slider",
    "aria-label": "Before/after: share of the original shown",
  });
  const apply = () => {
    before.style.clipPath = `inset(0 ${100 - Number(slider.value)}% 0 0)`;
    divider.style.left = `${slider.value}%`;
  };
  slider.addEventListener("input", apply);
  apply();
  return h("div", {}, frame,
    h("div", { class: "compare-labels small muted" }, h("span", {}, "Before"), slider, h("span", {}, "After")));
}

export function initJobs() {
  $("#refresh-jobs").addEventListener("click", () => showJobs().catch((e) => flashMessage(e.message)));
  $("#result-title").setAttribute("tabindex", "-1");
}
