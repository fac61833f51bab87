// The face picker: faces found (POST /v1/faces, nothing stored) in the source images and
// the target, shown as crops, with a source choice per target face. Indices follow the
// selector's default order (large-small), as the job's selector.mapping expects: source
// indices count the faces of every source image, image after image.

import { api } from "./api.js";
import { $, $$, h } from "./dom.js";

const found = new WeakMap(); // File -> Promise<{faces, width, height, bitmap}>
let generation = 0;

async function frameOf(file) {
  if (!file.type.startsWith("video/")) return { blob: file, bitmap: await createImageBitmap(file) };
  // A video: pick faces on its first frame (grabbed at 0.1 s, past a black first frame).
  const url = URL.createObjectURL(file);
  try {
    const video = h("video", { muted: true, preload: "auto", src: url });
    await new Promise((resolve, reject) => {
      video.onloadeddata = resolve;
      video.onerror = reject;
    });
    video.currentTime = Math.min(0.1, video.duration / 2 || 0);
    await new Promise((resolve) => { video.onseeked = resolve; });
    const canvas = h("canvas", { width: video.videoWidth, height: video.videoHeight });
    canvas.getContext("2d").drawImage(video, 0, 0);
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
    return { blob, bitmap: await createImageBitmap(canvas) };
  } finally {
    URL.revokeObjectURL(url);
  }
}

function detect(file) {
  if (!found.has(file)) {
    const work = (async () => {
      const { blob, bitmap } = await frameOf(file);
      const form = new FormData();
      form.append("image", blob, file.name);
      const response = await api("/v1/faces", { method: "POST", body: form });
      return { ...response, bitmap };
    })();
    found.set(file, work);
    work.catch(() => found.delete(file)); // let a later refresh retry
  }
  return found.get(file);
}

function crop(result, face, label) {
  const [x1, y1, x2, y2] = face.box;
  // Boxes are in upright pixels; the bitmap is upright too (EXIF applied by the browser).
  const scale = result.bitmap.width / result.width;
  const margin = 0.2 * Math.max(x2 - x1, y2 - y1);
  const sx = Math.max(0, (x1 - margin) * scale);
  const sy = Math.max(0, (y1 - margin) * scale);
  const sw = Math.min(result.bitmap.width - sx, (x2 - x1 + 2 * margin) * scale);
  const sh = Math.min(result.bitmap.height - sy, (y2 - y1 + 2 * margin) * scale);
  const canvas = h("canvas", { width: 96, height: 96, role: "img", "aria-label": label });
  const side = Math.max(sw, sh);
  canvas.getContext("2d").drawImage(result.bitmap, sx, sy, side, side, 0, 0, 96, 96);
  return canvas;
}

export function clearPicker() {
  generation += 1;
  $("#picker").hidden = true;
  $("#picker-sources").replaceChildren();
  $("#picker-targets").replaceChildren();
}

/** Re-detect (cached per file) and redraw; stale answers of an older call are dropped. */
export async function refreshPicker(sourceFiles, targetFile) {
  const mine = (generation += 1);
  if (!sourceFiles.length || !targetFile) {
    clearPicker();
    return;
  }
  const picker = $("#picker");
  picker.hidden = false;
  $("#picker-help").textContent = "Finding faces…";
  let sources;
  let target;
  try {
    sources = await Promise.all(sourceFiles.map(detect));
    target = await detect(targetFile);
  } catch (error) {
    if (mine === generation) $("#picker-help").textContent = `Faces could not be found: ${error.message}`;
    return;
  }
  if (mine !== generation) return;
  const sourceFaces = sources.flatMap((result, image) =>
    result.faces.map((face) => ({ result, face, image })));
  $("#picker-help").textContent = sourceFaces.length && target.faces.length
    ? "Pick which source face goes onto each target face. Leave all on “Automatic” to use the choice above."
    : `${sourceFaces.length} source face(s) and ${target.faces.length} target face(s) found; the swap needs at least one of each.`;
  $("#picker-sources").replaceChildren(
    ...sourceFaces.map(({ result, face, image }, index) =>
      h("figure", { class: "face" },
        crop(result, face, `Source face ${index + 1} (image ${image + 1})`),
        h("figcaption", {}, `S${index + 1}`))),
  );
  $("#picker-targets").replaceChildren(
    ...target.faces.map((face, index) => {
      const id = `map-target-${index}`;
      return h("div", { class: "face" },
        crop(target, face, `Target face ${index + 1}`),
        h("label", { for: id }, `Target face ${index + 1}`),
        h("select", { id, "data-target": index },
          h("option", { value: "auto" }, "Automatic"),
          h("option", { value: "keep" }, "Keep original"),
          ...sourceFaces.map((_, s) => h("option", { value: s }, `S${s + 1}`))));
    }),
  );
}

/** [source, target] pairs, or null when every target face is on "Automatic". */
export function mappingPairs() {
  const selects = $$("#picker-targets select");
  if (selects.every((select) => select.value === "auto")) return null;
  return selects
    .filter((select) => select.value !== "keep")
    .map((select) => [select.value === "auto" ? 0 : Number(select.value), Number(select.dataset.target)]);
}
