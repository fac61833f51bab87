// Job templates in the batches view: everyone with templates:read sees them (what they
// run, which saved faces); directors and editors (templates:write) save and delete them.

import { api } from "./api.js";
import { $, announce, flashMessage, h, showError } from "./dom.js";
import { turnWarning } from "./library.js";

let me = null;
let changed = () => {};
const can = (permission) => Boolean(me && me.permissions.includes(permission));

/** Show the templates card; ``onChange`` runs after a save or a delete (the batch form). */
export async function showTemplates(identity, faces, onChange) {
  me = identity;
  changed = onChange;
  const card = $("#templates-card");
  card.hidden = !can("templates:read");
  if (card.hidden) return;
  $("#template-form").hidden = !can("templates:write");
  $("#template-faces-field").hidden = faces.length === 0;
  $("#template-faces").replaceChildren(...faces.map(faceChoice));
  await refreshTemplates();
}

// A saved face to tick, and the target face it goes onto (1-based here; the API's mapping
// counts from 0), open once the face is ticked.
function faceChoice(face) {
  const target = h("input", {
    type: "number", name: "template-target", class: "target-index", min: 1, max: 256, step: 1,
    inputmode: "numeric", placeholder: "any", disabled: true, dataset: { name: face.name },
    "aria-label": `Target face for ${face.name}`,
  });
  const box = h("input", {
    type: "checkbox", name: "template-face", value: face.name,
    onchange: (event) => { target.disabled = !event.currentTarget.checked; },
  });
  return h("div", { class: "template-face" },
    h("label", { class: "check" }, box, ` ${face.name}`),
    h("label", { class: "check small" }, "onto target face", target),
    turnWarning(face, box));
}

/** face name -> target face index (from 0) of the ticked faces given a place, or an error. */
function chosenMapping() {
  const mapping = {};
  for (const input of document.querySelectorAll('input[name="template-target"]')) {
    if (input.disabled || (input.value === "" && !input.validity.badInput)) continue;
    const place = Number(input.value);
    if (input.validity.badInput || !Number.isInteger(place) || place < 1 || place > 256) {
      return { error: `The target face for ${input.dataset.name} is a whole number from 1 to 256.` };
    }
    mapping[input.dataset.name] = place - 1;
  }
  return { mapping };
}

async function refreshTemplates() {
  const templates = await api("/v1/templates");
  $("#template-list").replaceChildren(...templates.map(templateRow));
  $("#templates-empty").hidden = templates.length > 0;
}

function describe(template) {
  const options = template.options;
  const swapper = (options.processor_options || {}).face_swapper || {};
  const mapping = template.mapping || {};
  const mapped = Object.keys(mapping).length > 0;
  const placed = (name) => (name in mapping ? `${name} → target face ${mapping[name] + 1}` : name);
  const parts = [options.processors.join(", ") || "no processor"];
  if (swapper.blend !== undefined) parts.push(`blend ${Math.round(swapper.blend * 100)} %`);
  if (mapped) parts.push("the mapped faces");
  else parts.push(options.selector.mode === "many" ? "every face" : "the largest face");
  parts.push(template.faces.length ? `faces: ${template.faces.map(placed).join(", ")}` : "brings no faces");
  return parts.join(" · ");
}

function templateRow(template) {
  const row = h("li", { class: "saved-face template", id: `template-${template.id}`, dataset: { name: template.name } },
    h("div", { class: "face-text" },
      h("span", { class: "face-name" }, template.name),
      h("span", { class: "template-summary muted small" }, describe(template))));
  if (can("templates:write")) {
    row.append(h("div", { class: "face-actions" }, h("button", {
      type: "button", class: "danger template-delete", "aria-label": `Delete template ${template.name}`,
      onclick: (event) => deleteTemplate(event.currentTarget, template),
    }, "Delete")));
  }
  return row;
}

async function deleteTemplate(button, template) {
  if (button.dataset.confirm !== "yes") {
    button.dataset.confirm = "yes";
    button.textContent = `Confirm: delete ${template.name}`;
    return;
  }
  button.disabled = true;
  try {
    await api(`/v1/templates/${template.id}`, { method: "DELETE" });
    await refreshTemplates();
    await changed();
    announce(`Template ${template.name} deleted.`);
  } catch (error) {
    button.disabled = false;
    flashMessage(error.message);
  }
}

async function onSave(event) {
  event.preventDefault();
  const error = $("#template-error");
  const name = $("#template-name").value.trim();
  if (!name) {
    showError(error, "Give the template a name.");
    return;
  }
  const faces = [...document.querySelectorAll('input[name="template-face"]:checked')].map((box) => box.value);
  const { mapping, error: badPlace } = chosenMapping();
  if (badPlace) {
    showError(error, badPlace);
    return;
  }
  const body = {
    name,
    faces,
    options: {
      processors: ["face_swapper"],
      selector: { mode: $("#template-mode").value },
      processor_options: { face_swapper: { blend: Number($("#template-blend").value) / 100 } },
    },
  };
  if (Object.keys(mapping).length) body.mapping = mapping;
  try {
    const template = await api("/v1/templates", { method: "POST", json: body });
    showError(error, "");
    $("#template-form").reset();
    for (const input of document.querySelectorAll('input[name="template-target"]')) input.disabled = true;
    $("#template-blend-out").textContent = "100 %";
    await refreshTemplates();
    await changed();
    announce(`Template ${template.name} saved.`);
  } catch (failure) {
    showError(error, failure.message);
  }
}

export function initTemplates() {
  $("#template-form").addEventListener("submit", onSave);
  $("#template-blend").addEventListener("input", (event) => {
    $("#template-blend-out").textContent = `${event.target.value} %`;
  });
}
