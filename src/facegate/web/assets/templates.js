// Job templates in the batches view: everyone with templates:read sees them (what they
// run, which saved faces); directors and editors (templates:write) save and delete them.

import { api } from "./api.js";
import { $, announce, flashMessage, h, showError } from "./dom.js";

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
  $("#template-faces").replaceChildren(...faces.map((face) => h("label", { class: "check" },
    h("input", { type: "checkbox", name: "template-face", value: face.name }), ` ${face.name}`)));
  await refreshTemplates();
}

async function refreshTemplates() {
  const templates = await api("/v1/templates");
  $("#template-list").replaceChildren(...templates.map(templateRow));
  $("#templates-empty").hidden = templates.length > 0;
}

function describe(template) {
  const options = template.options;
  const swapper = (options.processor_options || {}).face_swapper || {};
  const parts = [options.processors.join(", ") || "no processor"];
  if (swapper.blend !== undefined) parts.push(`blend ${Math.round(swapper.blend * 100)} %`);
  parts.push(options.selector.mode === "many" ? "every face" : "the largest face");
  parts.push(template.faces.length ? `faces: ${template.faces.join(", ")}` : "brings no faces");
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
  const body = {
    name,
    faces,
    options: {
      processors: ["face_swapper"],
      selector: { mode: $("#template-mode").value },
      processor_options: { face_swapper: { blend: Number($("#template-blend").value) / 100 } },
    },
  };
  try {
    const template = await api("/v1/templates", { method: "POST", json: body });
    showError(error, "");
    $("#template-form").reset();
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
