// The "new swap" view: drop zones with previews, checks against the tenant's policy (from
// /v1/capabilities), options limited to what it allows, the face picker, and the upload
// with progress.

import { api, upload } from "./api.js";
import { $, announce, formatBytes, formatSeconds, h, showError } from "./dom.js";
import { clearPicker, mappingPairs, refreshPicker } from "./picker.js";
import { rememberInputs } from "./jobs.js";

const IMAGE_TYPES = ["image/jpeg", "image/png", "image/webp", "image/bmp", "image/tiff"];
const VIDEO_TYPES = ["video/mp4", "video/webm", "video/quicktime", "video/x-matroska"];
const MAX_SOURCES = 10;
const LABELS = {
  face_swapper: "Face swap",
  face_enhancer: "Face enhancer",
  frame_enhancer: "Frame enhancer (upscale)",
  face_debugger: "Face debugger (draw boxes)",
  age_modifier: "Age modifier",
  expression_restorer: "Expression restorer",
};

const state = { capabilities: null, sources: [], target: null, onSubmitted: () => {} };

export async function showSwap() {
  state.capabilities = await api("/v1/capabilities");
  renderOptions(state.capabilities);
}

/** The processors in LABELS order (the swapper first), unknown ones last. */
function orderProcessors(names) {
  const order = Object.keys(LABELS);
  const rank = (name) => (order.includes(name) ? order.indexOf(name) : order.length);
  return [...names].sort((a, b) => rank(a) - rank(b));
}

function renderOptions(caps) {
  const list = $("#processor-list");
  const checked = new Set(
    [...list.querySelectorAll("input:checked")].map((input) => input.value),
  );
  if (!list.children.length) checked.add("face_swapper");
  list.replaceChildren(
    ...orderProcessors(caps.processors).map((name) =>
      h("label", {},
        h("input", {
          type: "checkbox", name: "processor", value: name, checked: checked.has(name),
        }),
        ` ${LABELS[name] || name}`,
        // The processors' own declaration (/v1/capabilities): their use is audited.
        caps.sensitive_processors.includes(name)
          ? h("span", { class: "badge sensitive", title: "Its use is audited" }, "audited")
          : null)),
  );
  updateConsent();
  const format = $("#output-format");
  const chosen = format.value;
  format.replaceChildren(
    h("option", { value: "" }, "Same as the target"),
    ...caps.output_formats.map((name) => h("option", { value: name }, name.toUpperCase())),
  );
  format.value = caps.output_formats.includes(chosen) ? chosen : "";
  const limits = caps.limits;
  $("#limits-text").textContent =
    `Your plan: files up to ${formatBytes(limits.max_input_bytes)}, ` +
    `${(limits.max_input_pixels / 1e6).toFixed(0)} megapixels, videos up to ` +
    `${formatSeconds(limits.max_video_seconds)}; output up to ${limits.max_output_resolution}. ` +
    `Storage used ${formatBytes(limits.storage_used_bytes)} of ` +
    `${formatBytes(limits.storage_quota_bytes)}.`;
}

/** Why a file cannot be used, or null. Videos also get their duration checked. */
async function checkFile(file, { allowVideo }) {
  const limits = state.capabilities.limits;
  const isImage = IMAGE_TYPES.includes(file.type);
  const isVideo = allowVideo && VIDEO_TYPES.includes(file.type);
  if (!isImage && !isVideo) {
    const kinds = allowVideo ? "a JPEG, PNG, WebP, BMP or TIFF image, or an MP4, WebM, MOV or MKV video" : "a JPEG, PNG, WebP, BMP or TIFF image";
    return `${file.name} is not ${kinds}.`;
  }
  if (file.size > limits.max_input_bytes) {
    return `${file.name} is ${formatBytes(file.size)}; your plan allows ${formatBytes(limits.max_input_bytes)} per file.`;
  }
  const url = URL.createObjectURL(file);
  try {
    if (isImage) {
      const image = await loadImage(url);
      if (image.naturalWidth * image.naturalHeight > limits.max_input_pixels) {
        return `${file.name} has ${((image.naturalWidth * image.naturalHeight) / 1e6).toFixed(1)} megapixels; your plan allows ${(limits.max_input_pixels / 1e6).toFixed(0)}.`;
      }
    } else {
      const seconds = await videoDuration(url);
      if (seconds > limits.max_video_seconds) {
        return `${file.name} lasts ${formatSeconds(seconds)}; your plan allows ${formatSeconds(limits.max_video_seconds)}.`;
      }
    }
  } catch {
    // The browser cannot decode it (TIFF, say); the server's checks decide.
  } finally {
    URL.revokeObjectURL(url);
  }
  return null;
}

function loadImage(url) {
  return new Promise((resolve, reject) => {
    const image = new Image();
    image.onload = () => resolve(image);
    image.onerror = reject;
    image.src = url;
  });
}

function videoDuration(url) {
  return new Promise((resolve, reject) => {
    const video = document.createElement("video");
    video.preload = "metadata";
    video.onloadedmetadata = () => resolve(video.duration);
    video.onerror = reject;
    video.src = url;
  });
}

function preview(file, onRemove) {
  const url = URL.createObjectURL(file);
  const media = file.type.startsWith("video/")
    ? h("video", { src: url, muted: true, controls: true, preload: "metadata" })
    : h("img", { src: url, alt: `Preview of ${file.name}` });
  return h("li", { class: "preview" },
    media,
    h("span", { class: "small" }, `${file.name} · ${formatBytes(file.size)}`),
    h("button", {
      type: "button", class: "link", "aria-label": `Remove ${file.name}`, onclick: onRemove,
    }, "Remove"));
}

function renderFiles() {
  $("#source-previews").replaceChildren(
    ...state.sources.map((item, index) =>
      preview(item.file, () => {
        state.sources.splice(index, 1);
        renderFiles();
      })),
  );
  $("#target-preview").replaceChildren(
    ...(state.target ? [preview(state.target.file, () => { state.target = null; renderFiles(); })] : []),
  );
  refreshPicker(state.sources.map((item) => item.file), state.target && state.target.file);
}

async function addFiles(files, which) {
  showError($("#swap-error"), "");
  if (!state.capabilities) await showSwap();
  const problems = [];
  for (const file of files) {
    const problem = await checkFile(file, { allowVideo: which === "target" });
    if (problem) {
      problems.push(problem);
      continue;
    }
    if (which === "target") state.target = { file };
    else if (state.sources.length < MAX_SOURCES) state.sources.push({ file });
    else problems.push(`At most ${MAX_SOURCES} source images.`);
  }
  showError($("#swap-error"), problems.join(" "));
  renderFiles();
}

function wireDropzone(zone, input, which) {
  const choose = () => input.click();
  zone.addEventListener("click", choose);
  zone.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      choose();
    }
  });
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    const files = [...event.dataTransfer.files];
    addFiles(which === "target" ? files.slice(0, 1) : files, which);
  });
  input.addEventListener("change", () => {
    addFiles([...input.files], which);
    input.value = "";
  });
}

/** The checked processors that need a consent attestation (none when the plan asks none). */
function consentNeededFor(processors) {
  const caps = state.capabilities;
  if (!caps || !caps.require_consent) return [];
  return processors.filter((name) => caps.sensitive_processors.includes(name));
}

function checkedProcessors() {
  return [...document.querySelectorAll("#processor-list input:checked")].map((input) => input.value);
}

function updateConsent() {
  const needing = consentNeededFor(checkedProcessors());
  $("#consent-field").hidden = !needing.length;
  $("#consent-processors").textContent = needing.map((name) => LABELS[name] || name).join(", ");
}

/** One attestation for every source (the API's ``consent`` field), or null. */
function consentValue(options) {
  if (!consentNeededFor(options.processors).length || !state.sources.length) return null;
  return {
    attested_by: $("#consent-by").value.trim(),
    statement_version: $("#consent-version").value.trim(),
  };
}

function buildOptions() {
  const processors = checkedProcessors();
  const options = {
    processors,
    selector: { mode: $("#selector-mode").value },
    output: {},
  };
  if (processors.includes("face_swapper")) {
    options.processor_options = { face_swapper: { blend: Number($("#blend").value) / 100 } };
  }
  const pairs = mappingPairs();
  if (pairs) options.selector = { mode: "many", mapping: pairs };
  if ($("#output-format").value) options.output.format = $("#output-format").value;
  return options;
}

function validate(options) {
  if (!options.processors.length) return "Choose at least one processor.";
  if (!state.target) return "Add a target image or video.";
  if (options.selector.mapping && !options.selector.mapping.length) {
    return "Every target face is set to “Keep original”: there is nothing to swap.";
  }
  if (options.processors.includes("face_swapper") && !state.sources.length) {
    return "Face swap needs at least one source face image.";
  }
  const consent = consentValue(options);
  if (consent && (!consent.attested_by || !consent.statement_version || !$("#consent-confirm").checked)) {
    return "Your plan requires consent: say who attests it, the statement version, and confirm it.";
  }
  return null;
}

async function submit(event) {
  event.preventDefault();
  const error = $("#swap-error");
  const options = buildOptions();
  const problem = validate(options);
  showError(error, problem);
  if (problem) return;
  const form = new FormData();
  for (const item of state.sources) form.append("source", item.file, item.file.name);
  form.append("target", state.target.file, state.target.file.name);
  form.append("options", JSON.stringify(options));
  const consent = consentValue(options);
  if (consent) form.append("consent", JSON.stringify(consent));
  const button = $("#submit-job");
  const bar = $("#upload-progress");
  const text = $("#upload-text");
  button.disabled = true;
  bar.hidden = false;
  bar.value = 0;
  try {
    const job = await upload("/v1/jobs", form, (fraction) => {
      bar.value = Math.round(fraction * 100);
      text.textContent = `Uploading ${Math.round(fraction * 100)} %`;
    });
    text.textContent = "Uploaded.";
    announce(`Job ${job.id.slice(0, 8)} queued.`);
    rememberInputs(job.id, state.sources.map((item) => item.file), state.target.file);
    state.sources = [];
    state.target = null;
    clearPicker();
    renderFiles();
    state.onSubmitted(job);
  } catch (failure) {
    showError(error, failure.message);
    text.textContent = "";
  } finally {
    button.disabled = false;
    bar.hidden = true;
  }
}

export function initSwap({ onSubmitted }) {
  state.onSubmitted = onSubmitted;
  wireDropzone($("#drop-source"), $("#source-input"), "source");
  wireDropzone($("#drop-target"), $("#target-input"), "target");
  $("#blend").addEventListener("input", () => {
    $("#blend-out").textContent = `${$("#blend").value} %`;
  });
  $("#processor-list").addEventListener("change", updateConsent);
  $("#swap-form").addEventListener("submit", submit);
}
