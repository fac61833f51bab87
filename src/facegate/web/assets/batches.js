// Batches: submit one source (saved faces, an upload, or a template) × many targets, follow
// the progress across the items (polling GET /v1/batches/<id>), and the results as a gallery
// with a ZIP of them all. Viewers see the batches and results without the submission form.

import { ApiError, api, apiBlob, upload } from "./api.js";
import { $, announce, flashMessage, formatTime, h, showError } from "./dom.js";
import { turnWarning } from "./library.js";
import { showTemplates } from "./templates.js";

const POLL_MS = 1000;
const SWAP_OPTIONS = JSON.stringify({ processors: ["face_swapper"] });
let me = null;
let opened = null; // {id, timer, shown: Map(position -> status), urls: string[]}
const can = (permission) => Boolean(me && me.permissions.includes(permission));

export async function showBatches(identity) {
  me = identity;
  const submitting = can("jobs:write");
  $("#batch-form-card").hidden = !submitting;
  const faces = can("faces:read") ? await api("/v1/faces/library") : [];
  if (submitting) await fillForm(faces);
  await showTemplates(me, faces, async () => { if (submitting) await fillForm(faces); });
  await refreshBatches();
}

async function fillForm(faces) {
  $("#batch-faces-field").hidden = faces.length === 0;
  $("#batch-faces").replaceChildren(...faces.flatMap((face) => {
    const box = h("input", { type: "checkbox", name: "batch-face", value: face.id, dataset: { name: face.name } });
    return [h("label", { class: "check" }, box, ` ${face.name}`), turnWarning(face, box)];
  }).filter(Boolean));
  const templates = can("templates:read") ? await api("/v1/templates") : [];
  const select = $("#batch-template");
  select.replaceChildren(select.options[0],
    ...templates.map((template) => h("option", { value: template.id },
      template.faces.length ? `${template.name} (${template.faces.join(", ")})` : template.name)));
}

async function refreshBatches() {
  const batches = await api("/v1/batches");
  $("#batch-list").replaceChildren(...batches.map((batch) => h("li", {
    class: "batch", id: `batch-${batch.id}`,
  }, h("button", {
    type: "button", class: "link", onclick: () => openBatch(batch.id),
  }, `${batch.total} target${batch.total === 1 ? "" : "s"} · ${formatTime(batch.created_at)}`),
  h("span", { class: "muted small" }, ` by ${batch.created_by}`))));
  $("#batches-empty").hidden = batches.length > 0;
}

async function onSubmit(event) {
  event.preventDefault();
  const error = $("#batch-error");
  const targets = [...$("#batch-targets").files];
  const source = $("#batch-source").files[0];
  const template = $("#batch-template").value;
  const faceIds = [...document.querySelectorAll('input[name="batch-face"]:checked')].map((box) => box.value);
  if (!targets.length) {
    showError(error, "Choose one or more targets.");
    return;
  }
  if (!template && !faceIds.length && !source) {
    showError(error, "Pick saved faces, upload a source face or choose a template.");
    return;
  }
  showError(error, "");
  const form = new FormData();
  for (const file of targets) form.append("target", file, file.name);
  if (template) form.append("template", template);
  else form.append("options", SWAP_OPTIONS);
  for (const id of faceIds) form.append("source_face_id", id);
  if (source) form.append("source", source, source.name);
  const button = $("#submit-batch");
  button.disabled = true;
  try {
    const batch = await upload("/v1/batches", form, (fraction) => {
      $("#batch-busy").textContent = `Uploading ${Math.round(fraction * 100)} %`;
    });
    $("#batch-form").reset();
    announce(`Batch of ${batch.total} queued.`);
    await refreshBatches();
    await openBatch(batch.id);
  } catch (failure) {
    showError(error, failure.message);
  } finally {
    button.disabled = false;
    $("#batch-busy").textContent = "";
  }
}

function closeBatch() {
  if (!opened) return;
  clearTimeout(opened.timer);
  for (const url of opened.urls) URL.revokeObjectURL(url);
  opened = null;
}

async function openBatch(id) {
  closeBatch();
  opened = { id, timer: null, shown: new Map(), urls: [] };
  $("#batch-gallery").replaceChildren();
  $("#batch-detail").hidden = false;
  $("#batch-title").textContent = `Batch ${id.slice(0, 8)}`;
  await poll(opened);
}

async function poll(current) {
  if (opened !== current || $("#view-batches").hidden) return;
  let batch;
  try {
    batch = await api(`/v1/batches/${current.id}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) closeBatch();
    flashMessage(error.message);
    return;
  }
  if (opened !== current) return;
  render(current, batch);
  if (batch.status !== "completed") current.timer = setTimeout(() => poll(current), POLL_MS);
  else announce(`Batch ${batch.id.slice(0, 8)} completed.`);
}

function render(current, batch) {
  const done = batch.total - (batch.counts.queued || 0) - (batch.counts.running || 0);
  const progress = $("#batch-progress");
  progress.value = batch.progress;
  progress.dataset.status = batch.status;
  $("#batch-counts").textContent = `${done} of ${batch.total} done · ${batch.counts.succeeded} succeeded`
    + `${batch.counts.failed ? ` · ${batch.counts.failed} failed` : ""}`
    + `${batch.counts.cancelled ? ` · ${batch.counts.cancelled} cancelled` : ""}`
    + ` · ${Math.round(batch.progress * 100)} %`;
  $("#batch-detail").dataset.status = batch.status;
  $("#download-batch").disabled = batch.counts.succeeded === 0;
  const gallery = $("#batch-gallery");
  for (const item of batch.items) {
    if (current.shown.get(item.position) === item.status) continue;
    current.shown.set(item.position, item.status);
    const tile = galleryTile(current, item);
    const old = document.getElementById(`item-${item.position}`);
    if (old) old.replaceWith(tile);
    else gallery.append(tile);
  }
}

function galleryTile(current, item) {
  const caption = h("figcaption", { class: "small" }, `Target ${item.position + 1} · ${item.status}`,
    ...(item.quality || []).map((face) => h("span", {
      class: `quality-face verdict-${face.verdict.replace(" ", "-")}`, "data-verdict": face.verdict,
      title: `Face ${face.face + 1}: ${face.d_source.toFixed(2)} from the source` +
        (face.tone === null ? "" : `, tone ΔE ${face.tone.toFixed(1)}`),
    }, " ", h("span", { class: "badge" }, face.verdict))));
  const tile = h("li", { class: "tile", id: `item-${item.position}`, dataset: { status: item.status } },
    h("figure", {}, h("div", { class: "tile-media" }), caption));
  if (item.status === "succeeded" && item.result) {
    apiBlob(item.result).then((blob) => {
      if (opened !== current) return;
      const url = URL.createObjectURL(blob);
      current.urls.push(url);
      const media = blob.type.startsWith("video/")
        ? h("video", { src: url, controls: true, class: "result-media" })
        : h("img", { src: url, alt: `Result of target ${item.position + 1}`, class: "result-media" });
      tile.querySelector(".tile-media").replaceChildren(media);
    }).catch((error) => flashMessage(error.message));
  } else if (item.error) {
    tile.querySelector(".tile-media").replaceChildren(h("p", { class: "error-text" }, item.error.detail || item.error.type));
  } else {
    tile.querySelector(".tile-media").replaceChildren(h("progress", {
      max: 1, value: item.progress, "aria-label": `Target ${item.position + 1} progress`,
    }));
  }
  return tile;
}

async function downloadAll() {
  if (!opened) return;
  try {
    const blob = await apiBlob(`/v1/batches/${opened.id}/archive`);
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: `batch-${opened.id}.zip`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (error) {
    flashMessage(error.message);
  }
}

export function initBatches() {
  $("#batch-form").addEventListener("submit", onSubmit);
  $("#download-batch").addEventListener("click", downloadAll);
  $("#refresh-batches").addEventListener("click", () => refreshBatches().catch((e) => flashMessage(e.message)));
  window.addEventListener("hashchange", () => {
    if (!location.hash.startsWith("#/batches")) closeBatch();
  });
}
