//! The model key as ACP authentication. The server starts without the key
//! (an editor that launched it without one can still talk to it), offers
//! one auth method naming the variable, and refuses `session/prompt` with
//! `auth_required` until the key is there: in the environment, or passed
//! to `authenticate` in its `_meta` (`{"apiKey": "..."}`). A deployment
//! whose `[model] api_key_env` is empty sends no key and offers no method.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::v1::schema::{AuthMethod, AuthMethodAgent, AuthenticateRequest};
use agent_client_protocol::{Error, ErrorCode};
use stockade_model::{
    ChatMessage, Delta, ModelClient, ModelConfig, ModelError, ModelTurn, OpenAiCompatible, ToolSpec,
};
use stockade_shell::BoxFuture;

use crate::log;

/// The one auth method's id.
pub const ENV_KEY_METHOD: &str = "env-key";
/// The `_meta` key of `authenticate` that may carry the key itself.
pub const API_KEY_META: &str = "apiKey";

fn method_name(var: &str) -> String {
    format!("Model API key (${var})")
}

fn method_description(var: &str) -> String {
    format!(
        "Set {var} to the model API key in the agent's environment (the editor's agent server env) and restart the agent, or pass the key as _meta.{API_KEY_META} of authenticate."
    )
}

fn missing(var: &str) -> String {
    format!(
        "the model API key is not set: {var} is missing or empty in the agent's environment; set it and restart the agent, or authenticate with the key as _meta.{API_KEY_META}"
    )
}

/// The model client, once there is a key for it.
pub struct ModelAuth {
    config: ModelConfig,
    client: Mutex<Option<Arc<OpenAiCompatible>>>,
}

impl std::fmt::Debug for ModelAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelAuth")
            .field("api_key_env", &self.config.api_key_env)
            .field("ready", &self.ready())
            .finish()
    }
}

impl ModelAuth {
    /// The client from the environment's key, now; a missing key leaves it
    /// waiting for `authenticate`. Any other model misconfiguration fails.
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        let client = match OpenAiCompatible::new(config.clone()) {
            Ok(c) => Some(Arc::new(c)),
            Err(ModelError::MissingApiKey { var }) => {
                log(format_args!(
                    "{var} is not set: prompts are refused (auth_required) until the client authenticates"
                ));
                None
            }
            Err(e) => return Err(e),
        };
        Ok(Self {
            config,
            client: Mutex::new(client),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<OpenAiCompatible>>> {
        // Every change is one assignment: a panic cannot leave half a client.
        self.client.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether prompts can reach the model.
    pub fn ready(&self) -> bool {
        self.lock().is_some()
    }

    /// What `initialize` offers: the key's method, when the model takes one.
    pub fn methods(&self) -> Vec<AuthMethod> {
        let var = &self.config.api_key_env;
        if var.is_empty() {
            return Vec::new();
        }
        vec![AuthMethod::Agent(
            AuthMethodAgent::new(ENV_KEY_METHOD, method_name(var))
                .description(method_description(var)),
        )]
    }

    /// The error a prompt gets while there is no key.
    pub fn required(&self) -> Error {
        Error::new(ErrorCode::AUTH_REQUIRED, missing(&self.config.api_key_env))
    }

    /// `authenticate`: the key from `_meta`, else from the environment.
    pub fn authenticate(&self, req: &AuthenticateRequest) -> Result<(), Error> {
        if self.config.api_key_env.is_empty() || &*req.method_id.0 != ENV_KEY_METHOD {
            let offered: Vec<String> = self
                .methods()
                .iter()
                .map(|m| m.id().0.to_string())
                .collect();
            return Err(Error::new(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "unknown auth method {:?}; offered: [{}]",
                    req.method_id.0,
                    offered.join(", ")
                ),
            ));
        }
        let given = req
            .meta
            .as_ref()
            .and_then(|m| m.get(API_KEY_META))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let built = match given {
            Some(key) => OpenAiCompatible::with_api_key(self.config.clone(), Some(key.to_owned())),
            None => OpenAiCompatible::new(self.config.clone()),
        };
        match built {
            Ok(c) => {
                *self.lock() = Some(Arc::new(c));
                Ok(())
            }
            Err(ModelError::MissingApiKey { .. }) => Err(self.required()),
            Err(e) => Err(Error::new(ErrorCode::INTERNAL_ERROR, e.to_string())),
        }
    }
}

/// The agent's model: the authenticated client, or the missing-key error.
pub(crate) struct AuthedModel(pub Arc<ModelAuth>);

impl ModelClient for AuthedModel {
    fn complete<'a>(
        &'a self,
        messages: &'a [ChatMessage],
        tools: &'a [ToolSpec],
        on_delta: &'a (dyn Fn(Delta) + Send + Sync),
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        let client = self.0.lock().clone();
        Box::pin(async move {
            match client {
                Some(c) => c.complete(messages, tools, on_delta).await,
                None => Err(ModelError::MissingApiKey {
                    var: self.0.config.api_key_env.clone(),
                }),
            }
        })
    }
}
