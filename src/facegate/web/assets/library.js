// The face library: saved source faces. Everyone with faces:read sees the list; a director
// (faces:write) saves and renames, and (faces:manage) deletes. Controls a role may not use
// are not drawn at all (the API refuses them anyway).

import { ApiError, api, upload } from "./api.js";
import { $, announce, flashMessage, formatTime, h, showError } from "./dom.js";

let me = null;
const can = (permission) => Boolean(me && me.permissions.includes(permission));

export async function showLibrary(identity) {
  me = identity;
  $("#face-save-card").hidden = !can("faces:write");
  if (can("faces:write")) await showConsentFields();
  await refreshFaces();
}

async function showConsentFields() {
  let required = false;
  try {
    required = can("jobs:read") && (await api("/v1/capabilities")).limits.require_consent;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
  }
  $("#face-consent-field").hidden = !required;
}

async function refreshFaces() {
  const faces = await api("/v1/faces/library");
  $("#face-list").replaceChildren(...faces.map(faceRow));
  $("#faces-empty").hidden = faces.length > 0;
}

function faceRow(face) {
  const name = h("span", { class: "face-name" }, face.name);
  const labels = face.labels.length
    ? h("span", { class: "face-labels muted small" }, face.labels.join(", "))
    : null;
  const facts = h("span", { class: "muted small" },
    `${face.width}×${face.height} · saved ${formatTime(face.created_at)}`,
    face.consent ? " · consent recorded" : "");
  const actions = h("div", { class: "face-actions" });
  const row = h("li", { class: "saved-face", id: `face-${face.id}`, dataset: { name: face.name } },
    h("div", { class: "face-text" }, name, labels, facts, turnWarning(face)), actions);
  if (can("faces:write")) {
    actions.append(h("button", {
      type: "button", class: "secondary face-rename", "aria-label": `Rename ${face.name}`,
      onclick: () => startRename(row, face),
    }, "Rename"));
  }
  if (can("faces:manage")) {
    actions.append(h("button", {
      type: "button", class: "danger face-delete", "aria-label": `Delete ${face.name}`,
      onclick: (event) => deleteFace(event.currentTarget, face),
    }, "Delete"));
  }
  return row;
}

let warnings = 0; // numbers the ids of warnings that describe a control

/** A face the built-in swapper refuses (turned past its limit, both from the API): jobs
 * with it would fail (source-unusable), so say so wherever the face is listed or picked.
 * ``control`` (a face picker's checkbox), when given, is described by the warning, so a
 * screen reader reads it with the choice; the choice stays open (an installed ONNX swapper
 * may take the face). Null for a face the built-in swapper takes or that was never measured. */
export function turnWarning(face, control = null) {
  if (face.builtin_swap_usable !== false) return null;
  const warning = h("span", { class: "face-warning small", role: "note" },
    `Turned ${Math.round(face.turned)}° — the built-in swapper needs a face turned at most `
      + `${face.builtin_swap_max_turn}°.`);
  if (control) {
    warning.id = `turn-warning-${(warnings += 1)}`;
    control.setAttribute("aria-describedby", warning.id);
  }
  return warning;
}

function startRename(row, face) {
  const input = h("input", {
    class: "face-rename-input", value: face.name, maxlength: 200, "aria-label": "New name",
  });
  const error = h("p", { class: "error-text", role: "alert", hidden: true });
  const form = h("form", { class: "inline-form face-rename-form", novalidate: true },
    input,
    h("button", { type: "submit", class: "face-rename-save" }, "Save"),
    h("button", {
      type: "button", class: "secondary", onclick: () => row.replaceWith(faceRow(face)),
    }, "Cancel"),
    error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = input.value.trim();
    if (!name) {
      showError(error, "Enter a name.");
      return;
    }
    try {
      const renamed = await api(`/v1/faces/library/${face.id}`, { method: "PATCH", json: { name } });
      row.replaceWith(faceRow(renamed));
      announce(`Renamed to ${renamed.name}.`);
    } catch (failure) {
      showError(error, failure.message);
    }
  });
  row.querySelector(".face-text").replaceWith(form);
  row.querySelector(".face-actions").replaceChildren();
  input.focus();
}

async function deleteFace(button, face) {
  // Two steps: the first press asks, the second deletes (no modal dialog).
  if (button.dataset.confirm !== "yes") {
    button.dataset.confirm = "yes";
    button.textContent = `Confirm: delete ${face.name}`;
    return;
  }
  button.disabled = true;
  try {
    await api(`/v1/faces/library/${face.id}`, { method: "DELETE" });
    document.getElementById(`face-${face.id}`)?.remove();
    $("#faces-empty").hidden = $("#face-list").children.length > 0;
    announce(`${face.name} deleted.`);
  } catch (error) {
    button.disabled = false;
    flashMessage(error.message);
  }
}

function labelsJson(text) {
  return JSON.stringify(text.split(",").map((label) => label.trim()).filter(Boolean));
}

async function onSave(event) {
  event.preventDefault();
  const error = $("#face-error");
  const file = $("#face-image").files[0];
  const name = $("#face-name").value.trim();
  if (!file || !name) {
    showError(error, "Choose a photo and give the face a name.");
    return;
  }
  showError(error, "");
  const form = new FormData();
  form.append("image", file, file.name);
  form.append("name", name);
  form.append("labels", labelsJson($("#face-labels").value));
  if (!$("#face-consent-field").hidden) {
    form.append("consent", JSON.stringify({
      attested_by: $("#face-consent-by").value.trim(),
      statement_version: $("#face-consent-version").value.trim(),
    }));
  }
  const button = $("#save-face");
  button.disabled = true;
  $("#face-busy").textContent = "Finding the face…";
  try {
    const face = await upload("/v1/faces/library", form, () => {});
    $("#face-form").reset();
    await refreshFaces();
    announce(`${face.name} saved.`);
  } catch (failure) {
    showError(error, failure.message);
  } finally {
    button.disabled = false;
    $("#face-busy").textContent = "";
  }
}

export function initLibrary() {
  $("#face-form").addEventListener("submit", onSave);
}
